#pragma once
// The ranks' transport of a sharded stage: each rank holds one slab (a stage placed on
// "r0:cpu+r1:cpu" runs slab 0 on rank 0 and slab 1 on rank 1) and its own replica of the stage's
// parameters. Halos and partial sums travel through Comm's point-to-point c10d calls inside
// custom autograd functions: in backward, the halo's gradient is sent back to the neighbour and
// added to its boundary planes, and a sum's gradient is summed over the ranks again. Every rank
// of the slab group must run the same layers in the same order (message tags come from a counter).
#include "core/ranks/Comm.h"
#include "core/shard/ShardComm.h"

#include <memory>
#include <vector>

namespace splitseg::ranks {

class RankShardComm : public shard::ShardComm {
public:
  // ranks: the slab group in slab order; this rank must be among them. dim: the cut dimension.
  // tagBase: first message tag of this group (distinct from the pipeline's tags).
  RankShardComm(Comm& comm, std::vector<int> ranks, torch::Device device, int dim, int tagBase);

  int index() const override { return index_; }
  int count() const override { return static_cast<int>(ranks_.size()); }
  torch::Device device() const override { return device_; }
  int dim() const override { return dim_; }
  std::pair<torch::Tensor, torch::Tensor> exchangeHalo(const torch::Tensor& x, std::int64_t planes) override;
  torch::Tensor allReduceSum(const torch::Tensor& t) override;
  torch::Tensor local(const torch::Tensor& parameter) override;

  // Shared with the autograd functions (RankShardComm.cpp).
  struct State {
    Comm* comm = nullptr;
    std::vector<int> ranks;
    int index = 0;
    torch::Device device{torch::kCPU};
    int dim = 2;
    int nextTag = 0;
    int takeTag() { return nextTag++; }
  };

private:
  std::shared_ptr<State> state_;
  std::vector<int> ranks_;
  int index_ = 0;
  torch::Device device_;
  int dim_;
};

} // namespace splitseg::ranks
