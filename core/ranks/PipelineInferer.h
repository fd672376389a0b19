#pragma once
// Inference over ranks: rank 0 runs the Inferer (whole volume or sliding window) and hands each
// batch of windows to the ranks, which run their stages on it (forward only, each stage in its
// precision) and return the head's logits to rank 0. The other ranks serve until rank 0 finishes.
// With the run's micro-batches M > 1 and batches of several windows, the ranks work on different
// windows at the same time instead of one after another.
#include "core/ranks/Comm.h"
#include "core/ranks/PipelineSchedule.h"
#include "core/ranks/RankPeaks.h"
#include "core/engine/Inferer.h"
#include "core/run/RunSpec.h"

#include <map>
#include <memory>

namespace splitseg::ranks {

// One forward pass over the ranks (no gradients): rank 0 gives `input` and gets the head's logits
// (fp32, CPU or the head's device); the other ranks pass an undefined tensor and get one back.
// With the schedule's M > 1 micro-batches, `input` is cut along the batch into M parts that flow
// through the ranks in GPipe's wavefront (a rank runs part m + 1 while the next runs part m).
// Collective.
torch::Tensor forwardOverRanks(Comm& comm, model::StagedNetwork& network, const PipelineSchedule& schedule,
                               const std::vector<torch::Device>& devices, const placement::StagePrecisions& precision,
                               const torch::Tensor& input);
// Rank 0 -> every rank, before each forward pass of a serving loop: {M, n}, M >= 1 = a batch of n
// follows as M micro-batches; {0} = done; {-1} = send the peaks so far and start measuring again.
int controlTag();

class PipelineInferer final : public engine::WindowForward {
public:
  // Collective: every rank builds one with the same run; rank 0's weights go to the other ranks.
  PipelineInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run);
  ~PipelineInferer() override;

  // Rank 0. A batch of n windows flows through the ranks as min(run's micro-batches, n) parts.
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
  const PipelineSchedule& scheduleFor(int microBatches);

  Comm& comm_;
  std::shared_ptr<model::StagedNetwork> network_;
  run::RunSpec spec_;
  placement::Placement placement_;
  PipelineSchedule schedule_;  // one micro-batch: who owns what
  std::map<int, PipelineSchedule> schedules_;  // by micro-batch count
  std::vector<torch::Device> devices_;
  std::vector<torch::Tensor> channelsLast_;  // this rank's CPU weights turned NDHWC while it predicts
  bool finished_ = false;
  bool midPass_ = false;
  DevicePeaks peaks_;
};

} // namespace splitseg::ranks
