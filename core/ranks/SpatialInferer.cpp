#include "core/ranks/SpatialInferer.h"

#include "core/ranks/ExecutionMode.h"
#include "core/base/Error.h"
#include "core/shard/HaloConv3d.h"
#include "core/ranks/RankPeaks.h"
#include "core/ranks/RankShardComm.h"
#include "core/placement/ShardLayout.h"

#include <torch/torch.h>

#include <optional>

namespace splitseg::ranks {

namespace {
// Message tags; RankShardComm's start at kHaloTags for every forward pass.
constexpr int kControlTag = 31, kInputTag = 32, kOutputTag = 33, kPeaksTag = 34, kHaloTags = 1000, kWeightTags = 100000;
} // namespace

SpatialInferer::SpatialInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run)
    : comm_(comm), network_(std::move(network)), spec_(std::move(run)) {
  const auto placement = spec_.resolvePlacement(network_->stageNames(), "cpu");
  if (executionModeOf(placement, comm_.size()) != ExecutionMode::Sharded)
    throw InvalidArgument("placement: sharded inference over ranks needs every stage on the same ranks' devices, each rank once");
  if (!network_->supportsSharding())
    throw InvalidArgument("the " + network_->architecture() + " architecture does not support sharded stages");
  ranks_ = SpatialRanks::of(placement, comm_.rank());
  // Every rank runs the whole network: rank 0's weights and buffers to every other rank.
  {
    torch::NoGradGuard noGrad;
    auto tensors = network_->root().parameters();
    for (auto& b : network_->root().buffers()) tensors.push_back(b);
    int tag = kWeightTags;
    for (auto& t : tensors) {
      if (comm_.rank() == 0) {
        for (int r = 1; r < comm_.size(); ++r) comm_.send(t, r, tag, "rank 0's weights");
      } else {
        t.copy_(comm_.recv(0, tag, "rank 0's weights").to(t.scalar_type()));
      }
      ++tag;
    }
    comm_.flush();
  }
  network_->root().to(ranks_.device);
  network_->root().eval();
}

torch::Tensor SpatialInferer::forward(const torch::Tensor& batch) {
  if (comm_.rank() != 0) throw Error("internal: only rank 0 hands out windows");
  // A pass that stopped half-way (out of memory here, Cancel) left the others inside it: they
  // cannot take the next windows (`infer --dataset` goes on to its next case after such an error).
  if (midPass_)
    throw RankError("the ranks stopped inside an earlier pass (its error came first) and cannot predict more: start "
                    "the run again");
  const int dim = 2 + static_cast<int>(spec_.shardAxis);
  const std::int64_t extent = batch.size(dim);
  const std::int64_t multiple = network_->sizeDivisor();
  const auto count = static_cast<int>(ranks_.group.size());
  placement::ShardLayout layout;
  try {
    layout = placement::ShardLayout::even(spec_.shardAxis, extent, count, multiple);
    int deepest = 0;
    for (const auto& s : network_->stageSpecs()) deepest = std::max(deepest, s.level);
    layout.check(extent, multiple, deepest, network_->stageNames().front());
  } catch (const std::exception& e) {
    finish();  // the other ranks stop now instead of waiting out the rank timeout
    throw InvalidArgument(std::string("inference over ") + std::to_string(count) + " ranks: " + e.what() +
                          " (here: a larger window, or the whole volume)");
  }
  midPass_ = true;  // from the command on, the others are in this pass
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::ones({1}, torch::kLong), r, kControlTag, "a command");
  RankShardComm shards(comm_, ranks_.group, ranks_.device, dim, kHaloTags);
  torch::Tensor out;
  try {
    const auto mine = ranks_.scatter(comm_, batch.to(torch::kCPU), dim, layout.sizes, kInputTag, "a window slab");
    out = forwardSlab(*network_, spec_, shards, ranks_.device, mine.to(ranks_.device));
  } catch (const c10::OutOfMemoryError& e) {
    rethrowOutOfMemory(e, comm_.rank(), ranks_.device, "this rank's slab of every stage");
  }
  const auto parts = ranks_.gather(comm_, out, kOutputTag, "an output slab");
  midPass_ = false;
  return torch::cat(parts, dim);
}

void SpatialInferer::serve() {
  c10::InferenceMode inference;
  shard::OneDnnInferenceScope oneDnn;  // the kernels rank 0's Inferer runs
  const int dim = 2 + static_cast<int>(spec_.shardAxis);
  std::optional<PeakMeter> meter;
  meter.emplace(comm_.rank(), std::vector<torch::nn::Module*>{&network_->root()}, spec_.cpuBudgetBytes);
  while (true) {
    // 1: a pass follows; 2: send the peaks so far and start again (restartOtherPeaks); 0: done.
    const auto command = comm_.recv(0, kControlTag, "rank 0's next windows").item<std::int64_t>();
    if (command == 2) {
      sendPeaks(comm_, meter->peaks(), kPeaksTag);
      meter.reset();
      meter.emplace(comm_.rank(), std::vector<torch::nn::Module*>{&network_->root()}, spec_.cpuBudgetBytes);
      continue;
    }
    if (command != 1) break;
    RankShardComm shards(comm_, ranks_.group, ranks_.device, dim, kHaloTags);
    try {
      const auto slab = comm_.recv(0, kInputTag, "this rank's window slab");
      comm_.send(forwardSlab(*network_, spec_, shards, ranks_.device, slab.to(ranks_.device)), 0, kOutputTag,
                 "this rank's output slab");
    } catch (const c10::OutOfMemoryError& e) {
      rethrowOutOfMemory(e, comm_.rank(), ranks_.device, "this rank's slab of every stage");
    }
    comm_.flush();
  }
  sendPeaks(comm_, meter->peaks(), kPeaksTag);
  comm_.barrier("the end of inference");
}

std::map<std::string, std::int64_t> SpatialInferer::restartOtherPeaks() {
  if (comm_.rank() != 0 || finished_) return {};
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::full({1}, 2, torch::kLong), r, kControlTag, "a command");
  comm_.flush();
  return receivePeaks(comm_, kPeaksTag);
}

void SpatialInferer::finish() {
  if (finished_ || comm_.rank() != 0) return;
  finished_ = true;
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::zeros({1}, torch::kLong), r, kControlTag, "a command");
  comm_.flush();
  peaks_ = receivePeaks(comm_, kPeaksTag);
  comm_.barrier("the end of inference");
}

} // namespace splitseg::ranks
