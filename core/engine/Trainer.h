#pragma once
// Training loop over a SplitExecutor: one Adam over all parameters, metrics after every
// step, cancel and pause between steps, atomic checkpoints that resume exactly.
#include "core/base/CancelToken.h"
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/BatchDrawer.h"
#include "core/engine/Loss.h"
#include "core/engine/TrainingMetrics.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/TrainingLoop.h"
#include "core/run/CheckpointInfo.h"
#include "core/run/RunSpec.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace torch::optim { class Adam; }
namespace splitseg::checkpoint { struct CheckpointFile; }

namespace splitseg::engine {

class MemoryMeter;

// What a checkpoint says about itself (core/run/CheckpointInfo.h).
using CheckpointInfo = run::CheckpointInfo;
CheckpointInfo readCheckpointInfo(const std::string& path);
// Builds the checkpoint's network and loads its weights (on the CPU).
std::shared_ptr<model::StagedNetwork> loadNetwork(const std::string& path, CheckpointInfo* info = nullptr);

// The one checkpoint format, for the Trainer and for runs over ranks (rank 0 gathers first):
// weights, the Adam state of every parameter (in root().parameters() order), the run, the step,
// the sampler's and LibTorch's generators. Atomic and durable.
void writeCheckpoint(const std::string& path, model::StagedNetwork& network, torch::optim::Adam& optimizer,
                     const run::RunSpec& run, std::int64_t step, const std::string& sampleRng);
// Loads weights and optimizer state (on the CPU) and LibTorch's generators; refuses a checkpoint
// of another network.
CheckpointInfo readCheckpoint(const std::string& path, model::StagedNetwork& network, torch::optim::Adam& optimizer);
// The same from a file already read (`path` names it in messages).
CheckpointInfo readCheckpoint(const checkpoint::CheckpointFile& file, const std::string& path,
                              model::StagedNetwork& network, torch::optim::Adam& optimizer);

// One process: every stage in this process, on the devices its placement names.
class Trainer final : public TrainingMode {
public:
  // Trains `network` as `run` describes (its network fields are taken from `network`; stages
  // the placement does not list run on the first runnable device). Throws InvalidArgument
  // naming the first bad field.
  Trainer(std::shared_ptr<model::StagedNetwork> network, std::shared_ptr<data::SampleSource> source, run::RunSpec run);
  ~Trainer() override;

  // The training loop (runTraining) until totalSteps are done or the token is cancelled.
  // A step that runs out of memory throws OutOfMemoryError after freeing the step's memory;
  // model and optimizer keep their state from before that step.
  void run(MetricsSink* sink = nullptr, CancelToken* cancel = nullptr);
  StepMetrics step() override;
  // Out of memory: throws OutOfMemoryError (stage "<stage> (validation)") after freeing cached
  // memory; the network is back in training mode either way.
  ValidationMetrics validate() override;
  bool nextStep(CancelToken* cancel) override;
  [[noreturn]] void outOfMemory(const c10::OutOfMemoryError& e, const std::string& what) override;

  // Moves stages (and their optimizer state) to a new placement between steps.
  void setPlacement(const placement::Placement& placement);
  void setPrecision(const placement::StagePrecisions& precision);
  void setRecompute(const std::set<std::string>& stages);
  // CPU memory budget in bytes (0: none); a step that allocates beyond it is abandoned.
  void setCpuBudget(std::int64_t bytes);

  const placement::Placement& placement() const { return executor_.placement(); }

  void saveCheckpoint(const std::string& path) override;
  // Restores model, optimizer, step, RNG state and placement from a checkpoint written by
  // saveCheckpoint (the network options must match; throws otherwise).
  // `file`: the checkpoint already read from `path` (resuming reads it once), else read here.
  void loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file = nullptr);

  std::int64_t stepsDone() const override { return step_; }
  // The run as it stands (placement, precision and budget follow the setters above).
  const run::RunSpec& spec() const { return spec_; }
  SplitExecutor& executor() { return executor_; }
  MemoryMeter& meter() { return *meter_; }
  torch::optim::Adam& optimizer() { return *optimizer_; }
  // Called in step() after backward, right before the optimizer update (tests lower the budget
  // there to run out inside the update).
  void setBeforeOptimizerStep(std::function<void()> callback) { beforeOptimizerStep_ = std::move(callback); }
  // Draw the next step's batch (and check its labels) on a worker thread while the devices run this
  // step, as a PyTorch DataLoader's workers draw ahead; in pinned memory when the first stage is on
  // a GPU. Default: on when the first stage is on a GPU; on the CPU nothing would overlap. The
  // batches, their order and checkpoints are the same either way.
  void setPrefetch(bool on) { prefetch_ = on; }

private:
  bool prefetching() const;
  // The phases of one step: the batch, forward and loss and backward (abandoned on a non-finite
  // loss or out of memory, with the step's memory freed), the optimizer's update.
  void drawBatch(torch::Tensor& input, torch::Tensor& target, TimelineRecorder* timeline);
  LossResult forwardAndBackward(const torch::Tensor& input, const torch::Tensor& target, TimelineRecorder* timeline);
  double optimizerUpdate(TimelineRecorder* timeline);
  void abandonStep();
  // Weights of the fp32 CPU stages as spec_.cpuLayout says, Adam's moments beside their
  // parameters in the same layout (after construction, placement and precision changes).
  void applyCpuLayout();
  ValidationMetrics validateSamples();

  std::shared_ptr<model::StagedNetwork> network_;
  run::RunSpec spec_;
  SplitExecutor executor_;
  std::shared_ptr<data::SampleSource> source_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<MemoryMeter> meter_;
  BatchDrawer batches_;
  std::optional<bool> prefetch_;
  std::int64_t step_ = 0;
  std::function<void()> beforeOptimizerStep_;
  // run.timeline: every device's spans into StepMetrics::timeline (SplitExecutor::setTimeline).
  std::unique_ptr<TimelineRecorder> timeline_ = std::make_unique<TimelineRecorder>();
};

} // namespace splitseg::engine
