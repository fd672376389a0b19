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

// Whether a slab's 3x3x3 convolution calls oneDNN itself: on the CPU in fp32 at batch 1 where
// LibTorch would give the slab its vol2col kernel but the unsharded layer (count slabs like this
// one) oneDNN. `dim` is the cut axis (2 = D).
bool slabUsesOneDnn(const torch::Tensor& slab, const torch::Tensor& weight, int dim, int count);

} // namespace splitseg::shard
