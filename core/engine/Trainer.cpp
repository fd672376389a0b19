#include "core/engine/Trainer.h"
#include "core/checkpoint/CheckpointFile.h"
#include "core/base/Error.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/Devices.h"
#include "core/engine/NetworkFactory.h"
#include "core/engine/OptimizerStep.h"
#include "core/engine/Tensors.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define SPLITSEG_HAS_CUDA 1
#endif

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <numeric>

namespace splitseg::engine {

namespace {
void releaseCachedMemory() {
#ifdef SPLITSEG_HAS_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void synchronize(const placement::Placement& p) {
  for (const auto& d : p.devices())
    if (runsOn(d) != "cpu") torch::cuda::synchronize(torch::Device(runsOn(d)).index());
}
} // namespace

namespace {
run::RunSpec checkedRun(run::RunSpec run, const model::StagedNetwork& network) {
  run.architecture = network.architecture();
  run.networkOptions = nlohmann::json::parse(network.optionsJson());
  run.check({}, network.stageNames());
  return run;
}
} // namespace

Trainer::Trainer(std::shared_ptr<model::StagedNetwork> network, std::shared_ptr<data::SampleSource> source,
                 run::RunSpec run)
    : network_(network), spec_(checkedRun(std::move(run), *network)),
      executor_(network, spec_.resolvePlacement(network->stageNames(), runnableDeviceNames().front()), spec_.precision,
                spec_.recompute),
      source_(std::move(source)), batches_(source_, spec_, network->outChannels()) {
  spec_.setPlacement(executor_.placement());
  executor_.setSharding(spec_.shardAxis, spec_.shardSlabs);
  executor_.setOffload(spec_.offload);
  const auto div = network_->sizeDivisor();
  for (auto s : spec_.patch)
    if (s < div || s % div != 0)
      throw InvalidArgument("patch size " + std::to_string(s) + " must be a positive multiple of " +
                            std::to_string(div) + " for this network depth");
  torch::manual_seed(spec_.seed);
  applyCpuLayout();  // before Adam: its moments take their parameters' layout
  optimizer_ = std::make_unique<torch::optim::Adam>(network_->root().parameters(),
                                                    torch::optim::AdamOptions(spec_.learningRate));
  allocateAdamState(*optimizer_);  // moments exist before the first step, beside their parameters
  meter_ = std::make_unique<MemoryMeter>(executor_.placement().devices());
  applyCpuBudget(meter_->cpu(), spec_.cpuBudgetBytes, *optimizer_);
  executor_.setAfterStage([this](const std::string& stage, const torch::Device& device) {
    if (device.is_cpu()) checkCpuBudget(meter_->cpu(), "cpu", stage);
  });
}

Trainer::~Trainer() = default;

bool Trainer::prefetching() const { return prefetch_ ? *prefetch_ : executor_.inputDevice().is_cuda(); }

StepMetrics Trainer::step() {
  CpuMemoryScope scope(meter_->cpu());
  meter_->cpu().clearExceeded();
  meter_->resetPeaks();
  network_->root().train();
  const auto t0 = std::chrono::steady_clock::now();
  TimelineRecorder* timeline = spec_.timeline ? timeline_.get() : nullptr;
  if (timeline) timeline->begin();
  executor_.setTimeline(timeline);
  struct TimelineOff {
    SplitExecutor& executor;
    ~TimelineOff() { executor.setTimeline(nullptr); }
  } timelineOff{executor_};

  torch::Tensor input, target;
  drawBatch(input, target, timeline);
  optimizer_->zero_grad(true);
  const LossResult loss = forwardAndBackward(input, target, timeline);
  if (beforeOptimizerStep_) beforeOptimizerStep_();
  const double lr = optimizerUpdate(timeline);

  StepMetrics m;
  m.step = step_;
  m.totalSteps = spec_.totalSteps();
  m.epoch = spec_.epochs > 0 ? static_cast<int>((step_ - 1) / spec_.stepsPerEpoch) + 1 : 1;
  m.loss = loss.loss.item<double>();
  m.learningRate = lr;
  m.dice = loss.dice;
  m.meanDice = meanDice(loss.dice);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.memory = meter_->read();
  m.hostRss = processRssBytes();
  if (timeline) m.timeline = timeline->take();
  return m;
}

void Trainer::drawBatch(torch::Tensor& input, torch::Tensor& target, TimelineRecorder* timeline) {
  try {
    batches_.next(input, target);  // labels checked (InvalidArgument)
  } catch (const c10::OutOfMemoryError& e) {
    throw OutOfMemoryError("cpu", "batch", e.what_without_backtrace());
  }
  // Drawing the batch (or waiting for the one drawn ahead) holds the first device up: a wait for data.
  if (timeline)
    timeline->add(placement().deviceOf(network_->stageSpecs().front().name), "batch", SpanKind::Wait, 0.0, timeline->now());
  // The next batch is drawn on a worker thread while the devices run this step.
  if (prefetching() && anotherStepFollows(spec_, step_ + 1))
    batches_.drawAhead(/*pinned=*/executor_.inputDevice().is_cuda());
}

void Trainer::abandonStep() {
  executor_.setBackwardHook(nullptr);
  optimizer_->zero_grad(true);
  releaseCachedMemory();
}

LossResult Trainer::forwardAndBackward(const torch::Tensor& input, const torch::Tensor& target,
                                       TimelineRecorder* timeline) {
  // Which stage's backward runs now, and where the CPU budget was first exceeded.
  std::mutex mutex;
  std::string backwardStage = network_->stageSpecs().back().name;
  std::string budgetStage;
  executor_.setBackwardHook([&](const std::string& stage) {
    std::lock_guard<std::mutex> lock(mutex);
    if (budgetStage.empty() && meter_->cpu().exceeded()) budgetStage = backwardStage;
    backwardStage = stage;
  });
  LossResult loss;
  bool inBackward = false;
  try {
    torch::Tensor logits = executor_.forward(input);
    const double lossStart = timeline ? timeline->now() : 0.0;
    loss = segmentationLoss(logits, target.to(logits.device(), /*non_blocking=*/target.is_pinned()));
    // A NaN or infinite loss would make Adam write NaN into every weight (and the next save
    // would replace the last good checkpoint): the step is abandoned instead.
    const double value = loss.loss.item<double>();
    if (!std::isfinite(value)) {
      loss = LossResult();
      abandonStep();
      throw NonFiniteLoss(nonFiniteLossMessage(step_ + 1, value));
    }
    if (timeline)
      timeline->add(placement().deviceOf(network_->stageSpecs().back().name), "loss", SpanKind::Forward, lossStart,
                    timeline->now());
    inBackward = true;
    loss.loss.backward();
    if (timeline) {
      synchronize(placement());
      executor_.finishTimeline(timeline->now());
    }
  } catch (const OutOfMemoryError&) {
    abandonStep();
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    const std::string stage = inBackward ? backwardStage : executor_.currentStage();
    const std::string device = meter_->cpu().exceeded() ? "cpu" : placement().deviceOf(stage);
    abandonStep();
    throw OutOfMemoryError(device, stage + (inBackward ? " (backward)" : ""), e.what_without_backtrace());
  }
  executor_.setBackwardHook(nullptr);
  if (meter_->cpu().exceeded()) {
    const std::string stage = budgetStage.empty() ? backwardStage : budgetStage;
    loss = LossResult();
    abandonStep();
    throw OutOfMemoryError("cpu", stage + " (backward)", "allocation beyond " + cpuBudgetText(meter_->cpu()));
  }
  return loss;
}

double Trainer::optimizerUpdate(TimelineRecorder* timeline) {
  const double optimizerStart = timeline ? timeline->now() : 0.0;
  const double lr = spec_.learningRateAt(step_);
  setLearningRate(*optimizer_, lr);
  try {
    adamStep(*optimizer_);  // all-or-nothing: out of memory leaves weights and moments as they were
  } catch (const c10::OutOfMemoryError& e) {
    const std::string device = meter_->cpu().exceeded() ? "cpu" : placement().devices().front();
    abandonStep();
    throw OutOfMemoryError(device, "optimizer", e.what_without_backtrace());
  }
  synchronize(placement());
  ++step_;
  if (timeline) {
    // One Adam over every parameter: the step's update shows on each device that holds some.
    const double end = timeline->now();
    for (const auto& d : placement().devices()) timeline->add(d, "", SpanKind::Optimizer, optimizerStart, end);
  }
  return lr;
}

ValidationMetrics Trainer::validate() {
  // Same protection as a step: the budget applies, out of memory frees the cache, and the network
  // goes back to training mode on every exit.
  CpuMemoryScope scope(meter_->cpu());
  meter_->cpu().clearExceeded();
  torch::NoGradGuard noGrad;
  EvalModeGuard eval(network_->root());
  try {
    return validateSamples();
  } catch (const OutOfMemoryError&) {
    releaseCachedMemory();
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    const std::string device = meter_->cpu().exceeded() ? "cpu" : placement().deviceOf(executor_.currentStage());
    releaseCachedMemory();
    throw OutOfMemoryError(device, executor_.currentStage() + " (validation)", e.what_without_backtrace());
  }
}

ValidationMetrics Trainer::validateSamples() {
  ValidationMetrics v;
  v.step = step_;
  auto samples = batches_.validationSamples();
  if (samples.empty()) return v;
  v.cases = static_cast<int>(samples.size());
  std::vector<std::vector<double>> dices;
  for (const auto& s : samples) {
    auto input = toTensor(s.channels).unsqueeze(0);
    auto target = toTensor(s.label).round().to(torch::kLong).unsqueeze(0);
    auto logits = executor_.forward(input);
    auto r = segmentationLoss(logits, target.to(logits.device()));
    v.loss += r.loss.item<double>() / static_cast<double>(samples.size());
    dices.push_back(r.dice);
  }
  averageDice(v, dices);
  return v;
}

void Trainer::run(MetricsSink* sink, CancelToken* cancel) { runTraining(*this, spec_, sink, cancel); }

bool Trainer::nextStep(CancelToken* cancel) {
  if (!cancel) return true;
  try {
    cancel->pausePoint();  // waits while paused
  } catch (const Cancelled&) {
    return false;
  }
  return true;
}

void Trainer::outOfMemory(const c10::OutOfMemoryError& e, const std::string& what) {
  // step() and validate() name the stage themselves; this is what escaped them.
  releaseCachedMemory();
  throw OutOfMemoryError(meter_->cpu().exceeded() ? "cpu" : placement().devices().front(), what,
                         e.what_without_backtrace());
}

void Trainer::applyCpuLayout() {
  executor_.setCpuChannelsLast(false);
  if (planner::usesChannelsLast(spec_.cpuLayout)) executor_.setCpuChannelsLast(true, true);
  if (!optimizer_) return;
  // Adam's moments live beside their parameters, in their layout (elementwise updates: the values
  // are the same in any layout, the speed is not).
  const auto follow = [](const torch::Tensor& m, const torch::Tensor& p) {
    return m.to(p.device()).contiguous(p.suggest_memory_format());
  };
  for (auto& group : optimizer_->param_groups()) {
    for (auto& param : group.params()) {
      auto it = optimizer_->state().find(param.unsafeGetTensorImpl());
      if (it == optimizer_->state().end()) continue;
      auto& st = static_cast<torch::optim::AdamParamState&>(*it->second);
      st.exp_avg(follow(st.exp_avg(), param));
      st.exp_avg_sq(follow(st.exp_avg_sq(), param));
      if (st.max_exp_avg_sq().defined()) st.max_exp_avg_sq(follow(st.max_exp_avg_sq(), param));
    }
  }
}

void Trainer::setPlacement(const placement::Placement& p) {
  executor_.setCpuChannelsLast(false);  // every stage plain while it moves (a CUDA stage stays so)
  executor_.setPlacement(p);
  spec_.setPlacement(p);
  applyCpuLayout();
  meter_ = std::make_unique<MemoryMeter>(p.devices());
  applyCpuBudget(meter_->cpu(), spec_.cpuBudgetBytes, *optimizer_);  // the weights may have moved
}

void Trainer::setCpuBudget(std::int64_t bytes) {
  spec_.cpuBudgetBytes = bytes;
  meter_->cpu().setBudget(bytes);
}

void Trainer::setPrecision(const placement::StagePrecisions& precision) {
  spec_.precision = precision;
  executor_.setPrecision(precision);
  applyCpuLayout();  // the fp32 stages may have changed
}

void Trainer::setRecompute(const std::set<std::string>& stages) {
  spec_.recompute = stages;
  executor_.setRecompute(stages);
}

void Trainer::saveCheckpoint(const std::string& path) {
  writeCheckpoint(path, *network_, *optimizer_, spec_, step_, batches_.state());
}

void writeCheckpoint(const std::string& path, model::StagedNetwork& network, torch::optim::Adam& optimizer,
                     const run::RunSpec& run, std::int64_t step, const std::string& sampleRng) {
  // The run description travels with the weights: infer and --resume rebuild exactly this run.
  checkpoint::CheckpointFile::capture(network.root(), optimizer, CheckpointInfo{run, step, sampleRng}).write(path);
}

namespace {
void checkSameNetwork(const CheckpointInfo& info, model::StagedNetwork& network, const std::string& path) {
  if (info.run.architecture != network.architecture() ||
      info.run.networkOptions != nlohmann::json::parse(network.optionsJson()))
    throw InvalidArgument(path + ": checkpoint was trained with another network (" + info.run.architecture + " " +
                          info.run.networkOptions.dump() + ")");
}
} // namespace

CheckpointInfo readCheckpoint(const std::string& path, model::StagedNetwork& network, torch::optim::Adam& optimizer) {
  // One read; every tensor checked against the network before any is used.
  return readCheckpoint(checkpoint::CheckpointFile::read(path), path, network, optimizer);
}

CheckpointInfo readCheckpoint(const checkpoint::CheckpointFile& file, const std::string& path,
                              model::StagedNetwork& network, torch::optim::Adam& optimizer) {
  checkSameNetwork(file.info, network, path);
  try {
    file.loadInto(network.root(), &optimizer, path);
  } catch (const c10::Error& e) {
    throw FormatError(path, std::string("unreadable checkpoint: ") + e.what_without_backtrace());
  }
  return file.info;
}

void Trainer::loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file) {
  CheckpointInfo info = file ? readCheckpoint(*file, path, *network_, *optimizer_) : readCheckpoint(path, *network_, *optimizer_);
  batches_.restore(info.sampleRng, path);
  step_ = info.step;
  // Loading put tensors on the CPU; the current placement decides where they live.
  setPlacement(executor_.placement());
  allocateAdamState(*optimizer_);  // parameters the checkpoint had no moments for (saved before a step)
  applyCpuBudget(meter_->cpu(), spec_.cpuBudgetBytes, *optimizer_);
}

CheckpointInfo readCheckpointInfo(const std::string& path) { return checkpoint::CheckpointFile::read(path).info; }

std::shared_ptr<model::StagedNetwork> loadNetwork(const std::string& path, CheckpointInfo* infoOut) {
  const auto file = checkpoint::CheckpointFile::read(path);
  auto net = createNetwork(file.info.run.architecture, file.info.run.networkOptions.dump());
  file.loadInto(net->root(), nullptr, path);
  if (infoOut) *infoOut = file.info;
  return net;
}

} // namespace splitseg::engine
