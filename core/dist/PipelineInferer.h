#pragma once
// Inference over ranks: rank 0 runs the Inferer (whole volume or sliding window) and hands each
// batch of windows to the ranks, which run their stages on it (forward only, each stage in its
// precision) and return the head's logits to rank 0. The other ranks serve until rank 0 finishes.
#include "core/dist/Comm.h"
#include "core/dist/PipelineSchedule.h"
#include "core/engine/Inferer.h"
#include "core/run/RunSpec.h"

#include <memory>

namespace splitseg::dist {

// One forward pass over the ranks (no gradients; `schedule` with one micro-batch): rank 0 gives
// `input` and gets the head's logits (fp32, CPU or the head's device); the other ranks pass an
// undefined tensor and get one back. Collective.
torch::Tensor forwardOverRanks(Comm& comm, model::StagedNetwork& network, const PipelineSchedule& schedule,
                               const std::vector<torch::Device>& devices, const placement::StagePrecisions& precision,
                               const torch::Tensor& input);
// Rank 0 -> every rank, before each forward pass of a serving loop: 1 = a batch follows, 0 = done.
int controlTag();

class PipelineInferer final : public engine::WindowForward {
public:
  // Collective: every rank builds one with the same run; rank 0's weights go to the other ranks.
  PipelineInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run);

  torch::Tensor forward(const torch::Tensor& batch) override;  // rank 0
  model::StagedNetwork& network() override { return *network_; }
  // Ranks other than 0: run forward passes until rank 0 calls finish().
  void serve();
  // Rank 0: lets the others go; every rank then meets at a barrier.
  void finish();

private:
  Comm& comm_;
  std::shared_ptr<model::StagedNetwork> network_;
  run::RunSpec spec_;
  placement::Placement placement_;
  PipelineSchedule schedule_;
  std::vector<torch::Device> devices_;
  bool finished_ = false;
};

} // namespace splitseg::dist
