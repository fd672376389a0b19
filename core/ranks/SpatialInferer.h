#pragma once
// Inference with every stage sharded over the ranks (the placement ranks::SpatialTrainer trains):
// rank 0 runs the Inferer (whole volume or sliding window) and cuts each batch of windows into one
// slab per rank along the run's shard axis; every rank runs the whole network on its slab, halos
// and norm sums through RankShardComm, and sends its output slab back. A scan too large for one
// device's activations then needs no sliding window. The other ranks serve until rank 0 finishes.
#include "core/ranks/Comm.h"
#include "core/ranks/RankPeaks.h"
#include "core/ranks/SpatialTrainer.h"
#include "core/engine/Inferer.h"
#include "core/run/RunSpec.h"

#include <memory>

namespace splitseg::ranks {

class SpatialInferer final : public engine::WindowForward {
public:
  // Collective: every rank builds one with the same run; rank 0's weights go to the other ranks.
  SpatialInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run);

  // Rank 0. Throws InvalidArgument (after letting the other ranks go) when the windows' extent
  // along the shard axis cannot be cut into one slab per rank.
  torch::Tensor forward(const torch::Tensor& batch) override;
  model::StagedNetwork& network() override { return *network_; }
  // Rank 0: every other rank's peaks since it started serving or since the last call; their meters
  // start again.
  std::map<std::string, std::int64_t> restartOtherPeaks() override;
  // Ranks other than 0: run forward passes until rank 0 calls finish().
  void serve();
  // Rank 0: lets the others go; every rank then meets at a barrier.
  void finish();
  // Rank 0: no forward pass was left halfway (an exception inside one leaves the others mid-pass,
  // where finish() would only wait out the rank timeout).
  bool betweenPasses() const { return !midPass_; }
  // Rank 0, after finish(): the other ranks' memory peaks while they served (RankPeaks.h).
  const DevicePeaks& rankPeaks() const { return peaks_; }

private:
  Comm& comm_;
  std::shared_ptr<model::StagedNetwork> network_;
  run::RunSpec spec_;
  SpatialRanks ranks_;
  bool finished_ = false;
  bool midPass_ = false;
  DevicePeaks peaks_;
};

} // namespace splitseg::ranks
