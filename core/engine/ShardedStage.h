#pragma once
// Runs one stage of a StagedNetwork sharded over several devices in this process: one thread per
// slab, each under a ShardScope of a ThreadShardGroup, so the stage's shard-aware layers exchange
// halos and statistics while the slabs compute at the same time. Optionally checkpointed as one
// unit (all slabs recomputed together in backward, since their layers need each other).
#include "core/engine/Recompute.h"
#include "core/model/StagedNetwork.h"

#include <torch/types.h>

#include <vector>

namespace splitseg::engine {

struct ShardedStageRun {
  model::StagedNetwork* network = nullptr;
  std::size_t stage = 0;
  std::vector<torch::Device> devices;  // one per slab, in slab order
  int dim = 2;                         // tensor dimension the slabs are cut along
  bool bf16 = false;                   // autocast on each slab's device
  bool recompute = false;              // activation checkpointing of the whole sharded stage
  std::shared_ptr<OffloadChain> offload;  // recompute: its saved slabs go to host memory
};

// inputs[j]: the stage's inputs for slab j, on devices[j]. Returns slab j's output on devices[j].
// The first failure of any slab is rethrown after every slab stopped.
std::vector<torch::Tensor> runShardedStage(const ShardedStageRun& run,
                                           const std::vector<std::vector<torch::Tensor>>& inputs);

} // namespace splitseg::engine
