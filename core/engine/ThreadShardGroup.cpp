#include "core/engine/ThreadShardGroup.h"
#include "core/base/Error.h"

#include <ATen/ATen.h>

namespace splitseg::engine {

class ThreadShardGroup::Member : public shard::ShardComm {
public:
  Member(ThreadShardGroup& group, int index, torch::Device device, int dim)
      : group_(group), index_(index), device_(device), dim_(dim) {}
  int index() const override { return index_; }
  int count() const override { return static_cast<int>(group_.size()); }
  torch::Device device() const override { return device_; }
  int dim() const override { return dim_; }

  std::pair<torch::Tensor, torch::Tensor> exchangeHalo(const torch::Tensor& x, std::int64_t planes) override {
    auto& slots = group_.slots_;
    slots[index_] = x;
    group_.arrive();
    auto zeros = [&] {
      auto sizes = x.sizes().vec();
      sizes[dim_] = planes;
      return torch::zeros(sizes, x.options());
    };
    auto side = [&](int neighbour, bool tail) {
      const torch::Tensor& n = slots[neighbour];
      if (n.size(dim_) < planes)
        throw InvalidArgument("slab " + std::to_string(neighbour + 1) + " holds " + std::to_string(n.size(dim_)) +
                              " planes, thinner than the halo of " + std::to_string(planes));
      return n.narrow(dim_, tail ? n.size(dim_) - planes : 0, planes).to(device_, x.scalar_type());
    };
    torch::Tensor before = index_ > 0 ? side(index_ - 1, true) : zeros();
    torch::Tensor after = index_ + 1 < count() ? side(index_ + 1, false) : zeros();
    group_.arrive();  // every slab has read its neighbours: the slots may be reused
    return {before, after};
  }

  torch::Tensor allReduceSum(const torch::Tensor& t) override {
    auto& slots = group_.slots_;
    slots[index_] = t;
    group_.arrive();
    // The same order on every slab: every slab gets bit-identical sums.
    torch::Tensor sum = slots[0].to(device_);
    for (std::size_t k = 1; k < slots.size(); ++k) sum = sum + slots[k].to(device_);
    group_.arrive();
    return sum;
  }

  torch::Tensor local(const torch::Tensor& p) override {
    if (!p.defined() || p.device() == device_) return p;
    auto it = copies_.find(p.unsafeGetTensorImpl());
    if (it != copies_.end()) return it->second;
    return copies_[p.unsafeGetTensorImpl()] = p.to(device_);
  }

private:
  ThreadShardGroup& group_;
  int index_;
  torch::Device device_;
  int dim_;
  std::map<const void*, torch::Tensor> copies_;  // parameters borrowed for this run of the stage
};

ThreadShardGroup::ThreadShardGroup(std::vector<torch::Device> devices, int dim) : slots_(devices.size()) {
  for (std::size_t i = 0; i < devices.size(); ++i)
    members_.push_back(std::make_unique<Member>(*this, static_cast<int>(i), devices[i], dim));
}

ThreadShardGroup::~ThreadShardGroup() = default;

shard::ShardComm& ThreadShardGroup::member(std::size_t i) { return *members_.at(i); }

void ThreadShardGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

void ThreadShardGroup::arrive() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) throw Error("another slab of the sharded stage failed");
  const std::uint64_t gen = generation_;
  if (++waiting_ == members_.size()) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw Error("another slab of the sharded stage failed");
}

} // namespace splitseg::engine
