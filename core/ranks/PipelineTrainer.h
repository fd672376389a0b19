#pragma once
// Training over ranks: every rank runs this with the same run description (rank 0's); each runs
// the stages placed on it, sends activations and skip tensors forward and gradients back through
// Comm, and steps an Adam over its own parameters. Each batch is cut into micro-batches that flow
// through the ranks on the GPipe schedule (PipelineSchedule). Rank 0 draws the data, gathers the
// checkpoint (the Trainer's format: a run saved on 3 ranks resumes in one process and back) and
// reports the step with every rank's compute, wait and idle time, bytes moved and memory peak.
//
// Equal to single-process training: the loss is a mean over samples (soft Dice per sample and
// class, cross-entropy per voxel, all batches' patches the same size), so micro-batch m's loss
// weighted by its share of the batch sums to the batch's loss and the gradients add up to the
// batch's; Adam is elementwise, so one Adam per rank equals one over all parameters.
#include "core/base/CancelToken.h"
#include "core/ranks/Comm.h"
#include "core/ranks/RankTrainingMode.h"
#include "core/ranks/PipelineSchedule.h"
#include "core/engine/BatchDrawer.h"
#include "core/engine/TrainingMetrics.h"
#include "core/model/StagedNetwork.h"
#include "core/engine/StepTimeline.h"
#include "core/run/RunSpec.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace torch::optim { class Adam; }
namespace splitseg::checkpoint { struct CheckpointFile; }
namespace splitseg::data { class SampleSource; }
namespace splitseg::engine { class MemoryMeter; }

namespace splitseg::ranks {

// "enc0=r1:cpu" -> each stage's rank (stages without a rank: rank 0). Throws InvalidArgument when
// the placement names a rank outside 0..worldSize-1 or leaves a rank without a stage.
std::vector<int> stageOwners(const placement::Placement& placement, int worldSize);
// Each stage's device inside its rank's process ("r1:cuda:0" -> cuda:0), in stage order.
std::vector<torch::Device> stageDevices(const placement::Placement& placement);

// Rank 0's weights (parameters and buffers) of every stage placed on another rank, sent to that
// rank (collective; every rank calls it). Starts a run from one set of weights.
void sendWeightsFromRank0(Comm& comm, model::StagedNetwork& network, const PipelineSchedule& schedule);

class PipelineTrainer final : public RankTrainingMode {
public:
  // `source`: rank 0's training data (the others pass nullptr). The network is built from the run
  // on every rank; rank 0's weights are sent to the owners of the other stages.
  PipelineTrainer(Comm& comm, std::shared_ptr<model::StagedNetwork> network,
                  std::shared_ptr<data::SampleSource> source, run::RunSpec run);
  ~PipelineTrainer() override;

  // Collective calls: every rank makes them in the same order.
  // `cancel` (rank 0): Stop and Pause between steps, the same step on every rank.
  void run(engine::MetricsSink* sink = nullptr, CancelToken* cancel = nullptr);  // engine::runTraining
  engine::StepMetrics step() override;                     // complete on rank 0 (loss, Dice, ranks)
  // Rank 0's validation samples through the ranks, one forward pass each; loss and Dice as the
  // Trainer computes them (complete on rank 0).
  engine::ValidationMetrics validate() override;
  void saveCheckpoint(const std::string& path) override;   // rank 0 gathers and writes
  void loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file = nullptr);   // rank 0 reads and sends each rank its part
  void gatherWeights();                           // every stage's trained weights into rank 0's network
  void keepWeights() override { gatherWeights(); }

  std::int64_t stepsDone() const override { return step_; }
  const run::RunSpec& spec() const { return spec_; }
  const PipelineSchedule& schedule() const { return schedule_; }

private:
  torch::Device deviceOf(int stage) const;
  // The timeline lane of a stage: its rank and device ("r1:cuda:0").
  std::string laneOf(int stage) const;
  void moveOwnedToDevices();
  // The phases of one step (PipelineTrainer.cpp): rank 0 sends the micro-batches, each cell of
  // the schedule runs forward (the head stage's with the loss) and backward, then Adam steps and
  // rank 0 gathers the figures.
  struct StepState;
  void sendBatch(StepState& st);
  torch::Tensor fetch(StepState& st, const std::string& name, int micro);
  torch::Tensor runCell(StepState& st, const Cell& c, const std::vector<torch::Tensor>& in, bool bf16);
  void forwardCell(StepState& st, const Cell& c);
  void headLoss(StepState& st, const Cell& c, const torch::Tensor& out);
  void backwardCell(StepState& st, const Cell& c);
  void sendInputGradients(StepState& st, const Cell& c);
  double optimizerStep(StepState& st);
  engine::StepMetrics report(StepState& st, double lr, std::chrono::steady_clock::time_point t0);
  double spanEnd(const torch::Device& d);
  // This rank's spans as numbers for rank 0's step summary, and back (PipelineTrainer.cpp).
  void encodeSpans(const std::vector<engine::TimelineSpan>& spans, std::vector<double>& out) const;
  void decodeSpans(const std::vector<double>& in, std::vector<engine::TimelineSpan>& out) const;
  // Rank 0 -> owners: weights (with `withState`, also Adam state, from rank 0's `full`) of the
  // stages on other ranks. (RankCheckpoint.cpp, with the two below.)
  void scatter(bool withState, torch::optim::Adam* full);
  // Owners -> rank 0: into rank 0's copy of the network and into `full` (rank 0 only).
  // Every stage's weights and buffers into rank 0's network, and with `withState` each rank's Adam
  // state into rank 0's `full` optimizer (null on the other ranks).
  void gather(torch::optim::Adam* full, bool withState);

  std::shared_ptr<model::StagedNetwork> network_;
  std::shared_ptr<data::SampleSource> source_;
  run::RunSpec spec_;
  placement::Placement placement_;
  PipelineSchedule schedule_;
  PipelineSchedule forwardSchedule_;  // one micro-batch: validation
  std::vector<torch::Device> devices_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<engine::MemoryMeter> meter_;
  engine::BatchDrawer batches_;  // rank 0 draws the batches
  std::int64_t step_ = 0;
  engine::TimelineRecorder timeline_;  // run.timeline: this rank's spans; rank 0 gathers them
};

} // namespace splitseg::ranks
