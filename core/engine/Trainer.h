#pragma once
// Training loop over a SplitExecutor: one Adam over all parameters, metrics after every
// step, cancel and pause between steps, atomic checkpoints that resume exactly.
#include "core/base/CancelToken.h"
#include "core/data/SampleSource.h"
#include "core/engine/Metrics.h"
#include "core/engine/SplitExecutor.h"

#include <array>
#include <functional>
#include <memory>
#include <random>
#include <string>

namespace torch::optim { class Adam; }

namespace splitseg::engine {

class MemoryMeter;

// What a checkpoint says about itself (read without loading the weights into a network).
struct CheckpointInfo {
  std::string architecture;
  std::string optionsJson;
  std::string placementJson;
  std::string precision;  // ExecutorOptions::precisionText ("fp32", "bf16", "bf16:enc0,dec0")
  std::int64_t step = 0;
  std::string preprocessingJson;
  std::string sampleRng;
  std::array<std::int64_t, 3> patch{32, 32, 32};
};
CheckpointInfo readCheckpointInfo(const std::string& path);
// Builds the checkpoint's network and loads its weights (on the CPU).
std::shared_ptr<model::StagedNetwork> loadNetwork(const std::string& path, CheckpointInfo* info = nullptr);

struct TrainerOptions {
  std::int64_t steps = 100;               // total optimizer steps (epochs * stepsPerEpoch when epochs > 0)
  int epochs = 0;
  std::int64_t stepsPerEpoch = 50;
  int batch = 1;
  double learningRate = 1e-3;
  std::array<std::int64_t, 3> patch{32, 32, 32};  // x, y, z
  std::uint64_t seed = 0;
  std::string checkpointPath;             // empty: no checkpoints
  std::int64_t checkpointEvery = 0;       // steps; 0: only at the end
  std::int64_t validateEvery = 0;         // steps; 0: never
  std::int64_t cpuBudgetBytes = 0;        // CPU memory budget (0: none); beyond it a step fails as out of memory
  std::string preprocessingJson = "{}";   // stored in checkpoints so inference preprocesses the same way

  std::int64_t totalSteps() const { return epochs > 0 ? epochs * stepsPerEpoch : steps; }
};

class Trainer {
public:
  Trainer(std::shared_ptr<model::StagedNetwork> network, const placement::Placement& placement,
          std::shared_ptr<data::SampleSource> source, TrainerOptions options, ExecutorOptions exec = {});
  ~Trainer();

  // Runs until totalSteps are done or the token is cancelled (returns normally then).
  // A step that runs out of memory throws OutOfMemoryError after freeing the step's memory;
  // model and optimizer keep their state from before that step.
  void run(MetricsSink* sink = nullptr, CancelToken* cancel = nullptr);
  StepMetrics step();
  // Out of memory: throws OutOfMemoryError (stage "<stage> (validation)") after freeing cached
  // memory; the network is back in training mode either way.
  ValidationMetrics validate();

  // Moves stages (and their optimizer state) to a new placement between steps.
  void setPlacement(const placement::Placement& placement);
  void setExecutorOptions(const ExecutorOptions& options);
  // CPU memory budget in bytes (0: none); a step that allocates beyond it is abandoned.
  void setCpuBudget(std::int64_t bytes);
  const placement::Placement& placement() const { return executor_.placement(); }

  void saveCheckpoint(const std::string& path) const;
  // Restores model, optimizer, step, RNG state and placement from a checkpoint written by
  // saveCheckpoint (the network options must match; throws otherwise).
  void loadCheckpoint(const std::string& path);

  std::int64_t stepsDone() const { return step_; }
  const TrainerOptions& options() const { return options_; }
  SplitExecutor& executor() { return executor_; }
  MemoryMeter& meter() { return *meter_; }
  torch::optim::Adam& optimizer() { return *optimizer_; }
  // Called in step() after backward, right before the optimizer update (tests lower the budget
  // there to run out inside the update).
  void setBeforeOptimizerStep(std::function<void()> callback) { beforeOptimizerStep_ = std::move(callback); }

private:
  void makeBatch(torch::Tensor& input, torch::Tensor& target);
  ValidationMetrics validateSamples();

  std::shared_ptr<model::StagedNetwork> network_;
  SplitExecutor executor_;
  std::shared_ptr<data::SampleSource> source_;
  TrainerOptions options_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<MemoryMeter> meter_;
  std::mt19937_64 rng_;
  std::int64_t step_ = 0;
  std::function<void()> beforeOptimizerStep_;
};

} // namespace splitseg::engine
