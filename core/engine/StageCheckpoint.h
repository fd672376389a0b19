#pragma once
// Activation checkpointing for one stage. LibTorch's C++ API has none (pytorch issue 52744),
// so this is a custom autograd function: forward runs the stage without grad, keeping only its
// inputs; backward re-runs it with grad enabled, the random-number state of the forward restored
// (so dropout draws the same masks) and the same autocast settings, then back-propagates
// through the recomputed graph. Parameters are passed explicitly so their gradients flow
// through the function's graph edges into .grad as usual.
#include <torch/types.h>

#include <functional>
#include <vector>

namespace splitseg::engine {

using StageFunction = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;
// A stage with several outputs: a sharded stage returns one output slab per device.
using MultiStageFunction = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

// Runs `stage` on `inputs` checkpointed. `params` are the stage's parameters (those that do not
// require grad are ignored). Without grad mode (inference) it simply calls the stage.
torch::Tensor runCheckpointed(StageFunction stage, const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& params);
std::vector<torch::Tensor> runCheckpointedMulti(MultiStageFunction stage, const std::vector<torch::Tensor>& inputs,
                                                const std::vector<torch::Tensor>& params);

} // namespace splitseg::engine
