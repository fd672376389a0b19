#pragma once
// Activation checkpointing for one stage. LibTorch's C++ API has none (pytorch issue 52744),
// so this is a custom autograd function: forward runs the stage without grad, keeping only its
// inputs; backward re-runs it with grad enabled, the random-number state of the forward restored
// (so dropout draws the same masks) and the same autocast settings, then back-propagates
// through the recomputed graph. Parameters are passed explicitly so their gradients flow
// through the function's graph edges into .grad as usual.
#include <torch/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace splitseg::engine {

using StageFunction = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;
// A stage with several outputs: a sharded stage returns one output slab per device.
using MultiStageFunction = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

class OffloadChain;

// Runs `stage` on `inputs` checkpointed. `params` are the stage's parameters (those that do not
// require grad are ignored). Without grad mode (inference) it simply calls the stage.
// `offload` (optional): the saved inputs go to host memory (see OffloadChain).
torch::Tensor runRecomputed(StageFunction stage, const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& params,
                              const std::shared_ptr<OffloadChain>& offload = nullptr);
std::vector<torch::Tensor> runRecomputedMulti(MultiStageFunction stage, const std::vector<torch::Tensor>& inputs,
                                                const std::vector<torch::Tensor>& params,
                                                const std::shared_ptr<OffloadChain>& offload = nullptr);

// Host offload of the checkpointed stages of one forward pass (RunSpec::offload): each stage's
// saved inputs are copied to pinned host memory in forward instead of being kept on their GPU,
// copied back when the stage's backward begins, and the inputs of the stage whose backward comes
// next are prefetched then on a side stream, so that copy can overlap this stage's recompute
// (designed so; not yet measured on a GPU).
// One chain per forward pass, shared by its stages in the order they ran.
class OffloadChain {
public:
  struct Options {
    // Also copy CPU tensors (a host copy of a host tensor saves nothing): lets tests exercise
    // every step of the path on machines without a GPU.
    bool copyCpuTensors = false;
  };
  OffloadChain();
  explicit OffloadChain(Options options);
  ~OffloadChain();

  struct Entry;
  // Forward: stashes `inputs` on the host; returns the entry's index in the chain.
  std::size_t stash(const std::vector<torch::Tensor>& inputs);
  // Backward: the inputs of entry `i` back on their devices (waiting for their copy), and the
  // copy of entry i-1's inputs started. Releases entry i's host copies.
  std::vector<torch::Tensor> fetch(std::size_t i);
  // Bytes held on the host right now, and copies made (each direction counts), for tests and the UI.
  std::int64_t hostBytes() const;
  int copiesToHost() const;
  int copiesBack() const;
  int prefetches() const;  // fetches that were already under way when their backward began

private:
  void startCopyBack(Entry& e);
  Options options_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
  int toHost_ = 0, back_ = 0, prefetched_ = 0;
};

} // namespace splitseg::engine
