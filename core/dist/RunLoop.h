#pragma once
// What every trainer over ranks does around its steps (PipelineTrainer, SpatialTrainer): the steps
// of the run, validation and checkpoints at their cadence, the final checkpoint, and a barrier so
// rank 0 serves the rendezvous until every rank is done. Metrics go to the sink on rank 0 only.
#include "core/base/CancelToken.h"
#include "core/dist/Comm.h"
#include "core/dist/RankPeaks.h"
#include "core/engine/Metrics.h"
#include "core/run/RunSpec.h"

#include <vector>

namespace splitseg::dist {

// Before every step rank 0 tells the others whether to go on: Stop (rank 0's cancel token) ends
// the run on every rank after the same step; while paused, rank 0 keeps the others waiting with a
// message every second, so a pause is not taken for a dead rank.
int stepControlTag();
enum class StepControl : std::int64_t { Stop = 0, Step = 1, Paused = 2 };
bool nextStep(Comm& comm, CancelToken* cancel);

template <class Trainer>
void runOverRanks(Trainer& trainer, Comm& comm, const run::RunSpec& spec, engine::MetricsSink* sink,
                  CancelToken* cancel = nullptr) {
  const bool report = sink && comm.rank() == 0;
  const auto total = spec.totalSteps();
  auto checkpoint = [&] {
    trainer.saveCheckpoint(spec.checkpoint);
    if (report) sink->onCheckpoint(spec.checkpoint, trainer.stepsDone());
  };
  // Out of memory on this rank (a GPU, or the run's CPU budget) ends the run with the device, the
  // rank and the stage it was in named: the others cannot go on without this rank's part.
  const auto guarded = [&](const char* what, auto&& work) {
    try {
      return work();
    } catch (const c10::OutOfMemoryError& e) {
      const std::string& working = trainer.working();
      rethrowOutOfMemory(e, comm.rank(), working.empty() ? std::string(what) : working);
    }
  };
  while (trainer.stepsDone() < total) {
    if (!nextStep(comm, cancel)) break;
    auto m = guarded("a training step", [&] { return trainer.step(); });
    if (report) sink->onStep(m);
    const auto done = trainer.stepsDone();
    if (spec.validateEvery > 0 && done % spec.validateEvery == 0) {
      auto v = guarded("validation", [&] { return trainer.validate(); });
      if (report) sink->onValidation(v);
    }
    if (spec.checkpointEvery > 0 && done % spec.checkpointEvery == 0 && done < total && !spec.checkpoint.empty())
      checkpoint();
  }
  if (!spec.checkpoint.empty())
    checkpoint();
  else
    trainer.gatherWeights();  // rank 0's network ends trained without a file (the workstation)
  comm.barrier("the end of the run");
}

// Mean Dice per class (and over classes) of the validation samples' Dice values, into v.
inline void averageDice(engine::ValidationMetrics& v, const std::vector<std::vector<double>>& dices) {
  if (dices.empty()) return;
  v.dice.assign(dices.front().size(), 0.0);
  for (const auto& d : dices)
    for (std::size_t c = 0; c < d.size(); ++c) v.dice[c] += d[c] / static_cast<double>(dices.size());
  v.meanDice = 0;
  for (double d : v.dice) v.meanDice += d / static_cast<double>(v.dice.size());
}

} // namespace splitseg::dist
