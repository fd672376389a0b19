#pragma once
// The in-process transport of a sharded stage: one thread per slab, tensors handed over through
// shared slots between two barriers. Halo planes and partial sums are read straight from the
// neighbour's tensor (copied to this slab's device when it lives elsewhere), so autograd records
// the exchange like any other op and one backward pass routes the halo's gradient back to the
// owner's boundary. A slab that fails aborts the group: the others stop waiting and throw.
#include "core/shard/ShardComm.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace splitseg::engine {

class ThreadShardGroup {
public:
  // dim: tensor dimension the slabs are cut along (2 = D, 3 = H, 4 = W).
  ThreadShardGroup(std::vector<torch::Device> devices, int dim);
  ~ThreadShardGroup();
  shard::ShardComm& member(std::size_t i);
  std::size_t size() const { return members_.size(); }
  // Wakes every slab waiting on the others; they throw.
  void abort();

private:
  class Member;
  // Waits until every slab arrived (the slots then hold every slab's tensor). Throws once aborted.
  void arrive();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t waiting_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<torch::Tensor> slots_;
  std::vector<std::unique_ptr<Member>> members_;
};

} // namespace splitseg::engine
