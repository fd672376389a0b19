#include "core/engine/TrainingLoop.h"


namespace splitseg::engine {

namespace {
template <class Work>
auto guarded(TrainingMode& mode, const char* what, Work&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const c10::OutOfMemoryError& e) {
    mode.outOfMemory(e, what);
    throw;  // outOfMemory throws; this only tells the compiler
  }
}
} // namespace

void runTraining(TrainingMode& mode, const run::RunSpec& spec, MetricsSink* sink, CancelToken* cancel) {
  MetricsSink* report = mode.reports() ? sink : nullptr;
  const auto total = spec.totalSteps();
  const std::int64_t startedAt = mode.stepsDone();
  const bool saving = !spec.checkpoint.empty();
  const auto save = [&] {
    mode.saveCheckpoint(spec.checkpoint);
    if (report) report->onCheckpoint(spec.checkpoint, mode.stepsDone());
  };
  bool stopped = false;
  while (mode.stepsDone() < total) {
    if (!mode.nextStep(cancel)) {
      stopped = true;
      break;
    }
    StepMetrics m;
    try {
      m = guarded(mode, "a training step", [&] { return mode.step(); });
    } catch (const NonFiniteLoss&) {
      // Refused on every rank, weights as before it: the steps since the run started are kept.
      if (saving && mode.stepsDone() > startedAt) save();
      throw;
    } catch (const OutOfMemoryError&) {
      if (saving && mode.stepsDone() > startedAt && mode.savesAfterOutOfMemory()) save();
      throw;
    }
    if (report) report->onStep(m);
    const auto done = mode.stepsDone();
    if (spec.validateEvery > 0 && done % spec.validateEvery == 0) {
      auto v = guarded(mode, "validation", [&] { return mode.validate(); });
      if (report) report->onValidation(v);
    }
    if (spec.checkpointEvery > 0 && done % spec.checkpointEvery == 0 && done < total && saving) save();
  }
  // Stopping keeps the work: the last state goes to the checkpoint.
  if (saving)
    save();
  else
    mode.keepWeights();
  if (stopped && report) report->onMessage("stopped after step " + std::to_string(mode.stepsDone()));
  mode.finish();
}

std::string nonFiniteLossMessage(std::int64_t step, double value, int micro) {
  return "step " + std::to_string(step) + ": the loss" +
         (micro >= 0 ? " of micro-batch " + std::to_string(micro + 1) : std::string()) + " is " + std::to_string(value) +
         "; the step was not applied and the weights are as before it (lower the learning rate, or check the data "
         "for NaN)";
}

double meanDice(const std::vector<double>& perClass) {
  double sum = 0;
  for (double d : perClass) sum += d;
  return perClass.empty() ? 0.0 : sum / static_cast<double>(perClass.size());
}

void averageDice(ValidationMetrics& v, const std::vector<std::vector<double>>& perSample) {
  if (perSample.empty()) return;
  v.dice.assign(perSample.front().size(), 0.0);
  for (const auto& d : perSample)
    for (std::size_t c = 0; c < d.size(); ++c) v.dice[c] += d[c] / static_cast<double>(perSample.size());
  v.meanDice = meanDice(v.dice);
}

} // namespace splitseg::engine
