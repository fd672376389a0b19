#include "core/engine/ShardedStage.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/Recompute.h"
#include "core/engine/ThreadShardGroup.h"

#include <ATen/ThreadLocalState.h>
#include <torch/nn/module.h>

#include <atomic>
#include <exception>
#include <thread>

namespace splitseg::engine {

namespace {

std::vector<torch::Tensor> runSlabs(const ShardedStageRun& run, const std::vector<std::vector<torch::Tensor>>& inputs) {
  const std::size_t k = run.devices.size();
  ThreadShardGroup group(run.devices, run.dim);
  // Grad mode, inference mode and the other thread-local settings of the caller, for each slab.
  const at::ThreadLocalState callerState;
  std::vector<torch::Tensor> out(k);
  std::vector<std::exception_ptr> errors(k);
  std::atomic<int> firstFailure{-1};
  auto work = [&](std::size_t j) {
    try {
      std::optional<at::ThreadLocalStateGuard> state;
      if (j > 0) state.emplace(callerState);
      shard::ShardScope scope(&group.member(j));
      AutocastScope autocast(run.bf16, run.devices[j].type());
      out[j] = run.network->runStage(run.stage, inputs[j]);
    } catch (...) {
      errors[j] = std::current_exception();
      int none = -1;
      firstFailure.compare_exchange_strong(none, static_cast<int>(j));
      group.abort();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t j = 1; j < k; ++j) threads.emplace_back(work, j);
  work(0);
  for (auto& t : threads) t.join();
  if (firstFailure >= 0) std::rethrow_exception(errors[static_cast<std::size_t>(firstFailure.load())]);
  return out;
}

} // namespace

std::vector<torch::Tensor> runShardedStage(const ShardedStageRun& run,
                                           const std::vector<std::vector<torch::Tensor>>& inputs) {
  if (!run.recompute || !torch::GradMode::is_enabled()) return runSlabs(run, inputs);
  // Checkpointed: the slabs' inputs as one flat list, split again inside the recomputable function.
  std::vector<torch::Tensor> flat;
  std::vector<std::size_t> counts;
  for (const auto& in : inputs) {
    counts.push_back(in.size());
    flat.insert(flat.end(), in.begin(), in.end());
  }
  auto stage = [run, counts](const std::vector<torch::Tensor>& all) {
    std::vector<std::vector<torch::Tensor>> per;
    std::size_t at = 0;
    for (const auto c : counts) {
      per.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + c));
      at += c;
    }
    return runSlabs(run, per);
  };
  return runRecomputedMulti(stage, flat, run.network->stageModule(run.stage)->parameters(), run.offload);
}

} // namespace splitseg::engine
