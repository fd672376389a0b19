#pragma once
// Convolutions that work on a slab of a sharded stage. Outside a ShardScope they are LibTorch's
// Conv3d / ConvTranspose3d (same options, same parameter names, so checkpoints do not change).
// Inside one, HaloConv3d takes (k-1)/2 planes from each neighbouring slab and adds what they
// contribute to the zero-padded convolution of its slab, which gives the unsharded result on the
// slab (up to the order of the sums); a
// transposed convolution whose kernel equals its stride along the axis needs no halo. Parameters
// come from ShardComm::local, so a slab on another device borrows them differentiably.
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace splitseg::shard {

class HaloConv3dImpl : public torch::nn::Conv3dImpl {
public:
  using torch::nn::Conv3dImpl::Conv3dImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(HaloConv3d);

class ShardConvTranspose3dImpl : public torch::nn::ConvTranspose3dImpl {
public:
  using torch::nn::ConvTranspose3dImpl::ConvTranspose3dImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(ShardConvTranspose3d);

// The batch that the micro-batches run on this thread belong to (GPipe, ranks::PipelineTrainer),
// for the scope's lifetime; 0 (none) outside. Forward and backward, recomputation included, must
// run inside it so that a micro-batch runs the kernels its whole batch would (callsOneDnn).
class WholeBatchScope {
public:
  explicit WholeBatchScope(std::int64_t batch);
  ~WholeBatchScope();
  WholeBatchScope(const WholeBatchScope&) = delete;
  WholeBatchScope& operator=(const WholeBatchScope&) = delete;

private:
  std::int64_t previous_;
};

// Inference on this thread, for the scope's lifetime: a CPU fp32 convolution of one window that
// LibTorch would send to its vol2col kernel calls oneDNN instead, as if the window were part of a
// larger batch (callsOneDnn): sliding-window inference at one window per pass runs markedly
// faster so (docs/calibration.md, "Engine and model choices").
class OneDnnInferenceScope {
public:
  OneDnnInferenceScope();
  ~OneDnnInferenceScope();
  OneDnnInferenceScope(const OneDnnInferenceScope&) = delete;
  OneDnnInferenceScope& operator=(const OneDnnInferenceScope&) = delete;

private:
  bool previous_;
};

// Whether this module's convolution of `input` calls oneDNN itself rather than leaving the choice
// to LibTorch: on the CPU in fp32 at batch 1, where LibTorch would pick its vol2col kernel for
// `input` but oneDNN for a tensor `wholeFactor` times larger (a micro-batch of one sample of a
// batch of that many, a slab of a layer cut into that many along D or H, or both multiplied). A
// micro-batch or a slab then runs the kernel its whole batch or unsharded layer runs: the same
// numbers up to the order of the sums, and 2-13x faster. The planner mirrors it (cpuConvScratch).
bool callsOneDnn(const torch::Tensor& input, const torch::Tensor& weight, std::int64_t wholeFactor);

} // namespace splitseg::shard
