#pragma once
// Training with every stage sharded over the same ranks (each stage "r0:cpu+r1:cpu"): the volume is
// cut into one slab per rank and every rank runs the whole network on its slab, its layers
// exchanging halos and norm sums with the neighbours through RankShardComm. Each rank holds a
// replica of the weights. Rank 0 draws the batch as the Trainer does and sends each rank its slab;
// the output slabs come back to rank 0 for the loss (soft Dice needs the whole volume), and each rank
// gets the gradient of its slab back. The replicas' gradients are summed over the ranks and every
// rank steps the same Adam, so the replicas stay equal, and equal to training in one process.
// Validation runs through the ranks the same way, without gradients. With M micro-batches the
// batch runs as M parts one after another, each through forward and backward before the next, the
// parameters' gradients adding up (activations of one part at a time; the same weights).
#include "core/base/CancelToken.h"
#include "core/ranks/Comm.h"
#include "core/ranks/RankTrainingMode.h"
#include "core/engine/BatchDrawer.h"
#include "core/engine/TrainingMetrics.h"
#include "core/model/StagedNetwork.h"
#include "core/placement/ShardLayout.h"
#include "core/run/RunSpec.h"

#include <memory>
#include <vector>

namespace torch::optim { class Adam; }
namespace splitseg::checkpoint { struct CheckpointFile; }
namespace splitseg::data { class SampleSource; }
namespace splitseg::engine { class MemoryMeter; }

namespace splitseg::ranks {

class RankShardComm;

// This rank's part in a placement with every stage sharded over the same ranks: the ranks in slab
// order, this rank's slab and its device. Throws InvalidArgument when `rank` holds no slab.
struct SpatialRanks {
  std::vector<int> group;
  int index = 0;
  torch::Device device{torch::kCPU};
  static SpatialRanks of(const placement::Placement& placement, int rank);
  // Rank 0: `whole` cut along `dim` into slabs of `sizes` planes (slab order), each other rank's sent
  // to it under `tag`; returns rank 0's own slab.
  torch::Tensor scatter(Comm& comm, const torch::Tensor& whole, int dim, const std::vector<std::int64_t>& sizes,
                        int tag, const std::string& what) const;
  // Rank 0: every rank's output slab in slab order on `device`, rank 0's being `mine`.
  std::vector<torch::Tensor> gather(Comm& comm, const torch::Tensor& mine, int tag, const std::string& what) const;
};

// The whole network on this rank's slab, each stage in its precision (recomputed where `run` says,
// when gradients are on), halos and norm sums through `shards`. Logits in fp32.
torch::Tensor forwardSlab(model::StagedNetwork& network, const run::RunSpec& run, RankShardComm& shards,
                          torch::Device device, const torch::Tensor& slab);

class SpatialTrainer final : public RankTrainingMode {
public:
  // True when every stage is placed on the same ranks' devices, each of the worldSize ranks once.
  static bool applies(const placement::Placement& placement, int worldSize);

  // `source`: rank 0's training data (the others pass nullptr).
  SpatialTrainer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, std::shared_ptr<data::SampleSource> source,
                 run::RunSpec run);
  ~SpatialTrainer() override;

  // Collective: every rank calls them in the same order.
  // `cancel` (rank 0): Stop and Pause between steps, the same step on every rank.
  void run(engine::MetricsSink* sink = nullptr, CancelToken* cancel = nullptr);  // engine::runTraining
  engine::StepMetrics step() override;  // loss and Dice complete on rank 0
  // Rank 0's validation samples through the ranks (complete on rank 0).
  engine::ValidationMetrics validate() override;
  void saveCheckpoint(const std::string& path) override;  // rank 0 writes (every replica is the same)
  // Rank 0 reads `path` (the one-process format, from any run of this network) and sends every rank
  // the weights and the Adam state; the others pass "".
  void loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file = nullptr);
  // keepWeights: nothing to gather, every rank holds the whole network, the same after every step.

  std::int64_t stepsDone() const override { return step_; }
  const placement::ShardLayout& layout() const { return layout_; }

private:
  // Rank 0's weights, buffers and (withState) Adam state to every rank, in the module's order.
  void shareFromRankZero(bool withState);
  // Running statistics (batch norm) are kept by slab 0's rank: copied to every rank after a step.
  void syncBuffers();
  // The phases of one step (SpatialTrainer.cpp): each micro-batch's slabs forward, the loss on
  // rank 0 and backward; the replicas' gradients summed; every rank's figures to rank 0.
  struct StepState;
  void microBatch(StepState& st, RankShardComm& shards, int mb);
  void sumGradients(int dim);
  void gatherRankFigures(engine::StepMetrics& m);

  std::shared_ptr<model::StagedNetwork> network_;
  std::shared_ptr<data::SampleSource> source_;
  run::RunSpec spec_;
  SpatialRanks ranks_;  // the ranks in slab order, this rank's slab and device
  placement::ShardLayout layout_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<engine::MemoryMeter> meter_;
  engine::BatchDrawer batches_;  // rank 0 draws the batches
  std::int64_t step_ = 0;
};

} // namespace splitseg::ranks
