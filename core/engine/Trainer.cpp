#include "core/engine/Trainer.h"
#include "core/base/Error.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/NetworkFactory.h"
#include "core/engine/StepSafety.h"
#include "core/engine/Tensors.h"

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define SPLITSEG_HAS_CUDA 1
#endif

#include <chrono>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <sstream>

namespace splitseg::engine {

namespace {
constexpr int kCheckpointVersion = 1;

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void releaseCachedMemory() {
#ifdef SPLITSEG_HAS_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void synchronize(const placement::Placement& p) {
  for (const auto& d : p.devices())
    if (d != "cpu") torch::cuda::synchronize(torch::Device(d).index());
}
} // namespace

Trainer::Trainer(std::shared_ptr<model::StagedNetwork> network, const placement::Placement& placement,
                 std::shared_ptr<data::SampleSource> source, TrainerOptions options, ExecutorOptions exec)
    : network_(network), executor_(network, placement, exec), source_(std::move(source)),
      options_(std::move(options)), rng_(options_.seed) {
  if (options_.batch < 1) throw InvalidArgument("batch must be at least 1");
  if (options_.learningRate <= 0) throw InvalidArgument("learning rate must be positive");
  if (options_.totalSteps() < 1) throw InvalidArgument("nothing to train: steps must be at least 1");
  const auto div = network_->sizeDivisor();
  for (auto s : options_.patch)
    if (s < div || s % div != 0)
      throw InvalidArgument("patch size " + std::to_string(s) + " must be a positive multiple of " +
                            std::to_string(div) + " for this network depth");
  torch::manual_seed(options_.seed);
  optimizer_ = std::make_unique<torch::optim::Adam>(network_->root().parameters(),
                                                    torch::optim::AdamOptions(options_.learningRate));
  allocateAdamState(*optimizer_);  // moments exist before the first step, beside their parameters
  meter_ = std::make_unique<MemoryMeter>(placement.devices());
  meter_->cpu().setBudget(options_.cpuBudgetBytes);
  executor_.setAfterStage([this](const std::string& stage, const torch::Device& device) {
    if (device.is_cpu() && meter_->cpu().exceeded())
      throw OutOfMemoryError("cpu", stage, "allocation beyond the CPU budget of " +
                                               std::to_string(meter_->cpu().budget()) + " bytes");
  });
}

Trainer::~Trainer() = default;

void Trainer::makeBatch(torch::Tensor& input, torch::Tensor& target) {
  std::vector<torch::Tensor> images, labels;
  for (int b = 0; b < options_.batch; ++b) {
    data::Sample s = source_->next(options_.patch, rng_);
    images.push_back(toTensor(s.channels));
    labels.push_back(toTensor(s.label).round().to(torch::kLong));
  }
  input = torch::stack(images);
  target = torch::stack(labels);
}

StepMetrics Trainer::step() {
  CpuMemoryScope scope(meter_->cpu());
  meter_->cpu().clearExceeded();
  meter_->resetPeaks();
  network_->root().train();
  const auto t0 = std::chrono::steady_clock::now();

  torch::Tensor input, target;
  try {
    makeBatch(input, target);
  } catch (const c10::OutOfMemoryError& e) {
    throw OutOfMemoryError("cpu", "batch", e.what_without_backtrace());
  }
  optimizer_->zero_grad(true);

  // Which stage's backward runs now, and where the CPU budget was first exceeded.
  std::mutex mutex;
  std::string backwardStage = network_->stageSpecs().back().name;
  std::string budgetStage;
  executor_.setBackwardHook([&](const std::string& stage) {
    std::lock_guard<std::mutex> lock(mutex);
    if (budgetStage.empty() && meter_->cpu().exceeded()) budgetStage = backwardStage;
    backwardStage = stage;
  });
  auto abandon = [&]() {
    executor_.setBackwardHook(nullptr);
    optimizer_->zero_grad(true);
    releaseCachedMemory();
  };

  LossResult loss;
  bool inBackward = false;
  try {
    torch::Tensor logits = executor_.forward(input);
    loss = segmentationLoss(logits, target.to(logits.device()));
    inBackward = true;
    loss.loss.backward();
  } catch (const OutOfMemoryError&) {
    abandon();
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    const std::string stage = inBackward ? backwardStage : executor_.currentStage();
    const std::string device = meter_->cpu().exceeded() ? "cpu" : placement().deviceOf(stage);
    abandon();
    throw OutOfMemoryError(device, stage + (inBackward ? " (backward)" : ""),
                           e.what_without_backtrace());
  }
  executor_.setBackwardHook(nullptr);
  if (meter_->cpu().exceeded()) {
    const std::string stage = budgetStage.empty() ? backwardStage : budgetStage;
    loss = LossResult();
    abandon();
    throw OutOfMemoryError("cpu", stage + " (backward)",
                           "allocation beyond the CPU budget of " + std::to_string(meter_->cpu().budget()) + " bytes");
  }
  if (beforeOptimizerStep_) beforeOptimizerStep_();
  try {
    adamStep(*optimizer_);  // all-or-nothing: out of memory leaves weights and moments as they were
  } catch (const c10::OutOfMemoryError& e) {
    const std::string device = meter_->cpu().exceeded() ? "cpu" : placement().devices().front();
    abandon();
    throw OutOfMemoryError(device, "optimizer", e.what_without_backtrace());
  }
  synchronize(placement());
  ++step_;

  StepMetrics m;
  m.step = step_;
  m.totalSteps = options_.totalSteps();
  m.epoch = options_.epochs > 0 ? static_cast<int>((step_ - 1) / options_.stepsPerEpoch) + 1 : 1;
  m.loss = loss.loss.item<double>();
  m.dice = loss.dice;
  m.meanDice = mean(loss.dice);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.memory = meter_->read();
  m.hostRss = processRssBytes();
  return m;
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
  auto samples = source_->validation(options_.patch);
  if (samples.empty()) return v;
  std::vector<std::vector<double>> dices;
  for (const auto& s : samples) {
    auto input = toTensor(s.channels).unsqueeze(0);
    auto target = toTensor(s.label).round().to(torch::kLong).unsqueeze(0);
    auto logits = executor_.forward(input);
    auto r = segmentationLoss(logits, target.to(logits.device()));
    v.loss += r.loss.item<double>() / static_cast<double>(samples.size());
    dices.push_back(r.dice);
  }
  v.dice.assign(dices.front().size(), 0.0);
  for (const auto& d : dices)
    for (std::size_t c = 0; c < d.size(); ++c) v.dice[c] += d[c] / static_cast<double>(dices.size());
  v.meanDice = mean(v.dice);
  return v;
}

void Trainer::run(MetricsSink* sink, CancelToken* cancel) {
  const auto total = options_.totalSteps();
  auto save = [&]() {
    if (options_.checkpointPath.empty()) return;
    saveCheckpoint(options_.checkpointPath);
    if (sink) sink->onCheckpoint(options_.checkpointPath, step_);
  };
  while (step_ < total) {
    if (cancel) {
      try {
        cancel->checkpoint();
      } catch (const Cancelled&) {
        // Stopping keeps the work: the last state goes to the checkpoint.
        save();
        if (sink) sink->onMessage("stopped after step " + std::to_string(step_));
        return;
      }
    }
    StepMetrics m = step();
    if (sink) sink->onStep(m);
    if (options_.validateEvery > 0 && step_ % options_.validateEvery == 0) {
      auto v = validate();
      if (sink) sink->onValidation(v);
    }
    if (options_.checkpointEvery > 0 && step_ % options_.checkpointEvery == 0 && step_ < total) save();
  }
  save();
}

void Trainer::setPlacement(const placement::Placement& p) {
  executor_.setPlacement(p);
  // Adam's moments live beside their parameters; move them along.
  for (auto& group : optimizer_->param_groups()) {
    for (auto& param : group.params()) {
      auto it = optimizer_->state().find(param.unsafeGetTensorImpl());
      if (it == optimizer_->state().end()) continue;
      auto& st = static_cast<torch::optim::AdamParamState&>(*it->second);
      st.exp_avg(st.exp_avg().to(param.device()));
      st.exp_avg_sq(st.exp_avg_sq().to(param.device()));
      if (st.max_exp_avg_sq().defined()) st.max_exp_avg_sq(st.max_exp_avg_sq().to(param.device()));
    }
  }
  meter_ = std::make_unique<MemoryMeter>(p.devices());
  meter_->cpu().setBudget(options_.cpuBudgetBytes);
}

void Trainer::setCpuBudget(std::int64_t bytes) {
  options_.cpuBudgetBytes = bytes;
  meter_->cpu().setBudget(bytes);
}

void Trainer::setExecutorOptions(const ExecutorOptions& options) { executor_.setOptions(options); }

void Trainer::saveCheckpoint(const std::string& path) const {
  torch::serialize::OutputArchive archive, modelArchive, optimArchive;
  network_->root().save(modelArchive);
  optimizer_->save(optimArchive);
  archive.write("model", modelArchive);
  archive.write("optimizer", optimArchive);
  std::ostringstream rng;
  rng << rng_;
  nlohmann::json meta{{"version", kCheckpointVersion},
                      {"architecture", network_->architecture()},
                      {"options", nlohmann::json::parse(network_->optionsJson())},
                      {"placement", nlohmann::json::parse(executor_.placement().toJson())},
                      {"precision", executor_.options().precisionText()},
                      {"step", step_},
                      {"learning_rate", options_.learningRate},
                      {"patch", options_.patch},
                      {"batch", options_.batch},
                      {"seed", options_.seed},
                      {"preprocessing", nlohmann::json::parse(options_.preprocessingJson)},
                      {"sample_rng", rng.str()}};
  archive.write("meta", c10::IValue(meta.dump()));
  archive.write("torch_rng", torch::globalContext().defaultGenerator(torch::kCPU).get_state());
  saveCudaGeneratorStates(archive);
  // Atomic: a crash mid-write leaves the previous checkpoint intact.
  const std::string tmp = path + ".tmp";
  try {
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    std::filesystem::remove(tmp);
    throw IoError(path, std::string("cannot write checkpoint: ") + e.what_without_backtrace());
  }
  std::filesystem::rename(tmp, path);
}

void Trainer::loadCheckpoint(const std::string& path) {
  CheckpointInfo info = readCheckpointInfo(path);
  if (info.architecture != network_->architecture() ||
      nlohmann::json::parse(info.optionsJson) != nlohmann::json::parse(network_->optionsJson()))
    throw InvalidArgument(path + ": checkpoint was trained with another network (" + info.architecture + " " +
                          info.optionsJson + ")");
  torch::serialize::InputArchive archive, modelArchive, optimArchive;
  try {
    archive.load_from(path, torch::kCPU);
    archive.read("model", modelArchive);
    archive.read("optimizer", optimArchive);
    network_->root().load(modelArchive);
    optimizer_->load(optimArchive);
    torch::Tensor rngState;
    archive.read("torch_rng", rngState);
    at::Generator gen = torch::globalContext().defaultGenerator(torch::kCPU);
    gen.set_state(rngState);
    loadCudaGeneratorStates(archive);
  } catch (const c10::Error& e) {
    throw FormatError(path, std::string("unreadable checkpoint: ") + e.what_without_backtrace());
  }
  std::istringstream rng(info.sampleRng);
  rng >> rng_;
  step_ = info.step;
  // Loading put tensors on the CPU; the current placement decides where they live.
  setPlacement(executor_.placement());
  allocateAdamState(*optimizer_);  // parameters the checkpoint had no moments for (saved before a step)
}

CheckpointInfo readCheckpointInfo(const std::string& path) {
  if (!std::filesystem::exists(path)) throw IoError(path, "checkpoint not found");
  torch::serialize::InputArchive archive;
  c10::IValue metaValue;
  try {
    archive.load_from(path, torch::kCPU);
    if (!archive.try_read("meta", metaValue)) throw FormatError(path, "not a SplitSeg checkpoint (no metadata)");
  } catch (const c10::Error& e) {
    throw FormatError(path, std::string("not a readable checkpoint: ") + e.what_without_backtrace());
  }
  CheckpointInfo info;
  try {
    auto meta = nlohmann::json::parse(metaValue.toStringRef());
    info.architecture = meta.at("architecture").get<std::string>();
    info.optionsJson = meta.at("options").dump();
    info.placementJson = meta.at("placement").dump();
    info.precision = meta.value("precision", std::string("fp32"));
    info.step = meta.at("step").get<std::int64_t>();
    info.preprocessingJson = meta.value("preprocessing", nlohmann::json::object()).dump();
    info.sampleRng = meta.value("sample_rng", std::string());
    info.patch = meta.value("patch", std::array<std::int64_t, 3>{32, 32, 32});
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, std::string("checkpoint metadata is damaged: ") + e.what());
  }
  return info;
}

std::shared_ptr<model::StagedNetwork> loadNetwork(const std::string& path, CheckpointInfo* infoOut) {
  CheckpointInfo info = readCheckpointInfo(path);
  auto net = createNetwork(info.architecture, info.optionsJson);
  torch::serialize::InputArchive archive, modelArchive;
  try {
    archive.load_from(path, torch::kCPU);
    archive.read("model", modelArchive);
    net->root().load(modelArchive);
  } catch (const c10::Error& e) {
    throw FormatError(path, std::string("cannot load weights: ") + e.what_without_backtrace());
  }
  if (infoOut) *infoOut = info;
  return net;
}

} // namespace splitseg::engine
