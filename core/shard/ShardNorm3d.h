#pragma once
// Normalisation layers that work on a slab of a sharded stage. Outside a ShardScope they are
// LibTorch's InstanceNorm3d / BatchNorm3d (same options and parameter names). Inside one, the
// statistics are those of the whole volume: each slab sums its part, ShardComm::allReduceSum adds
// the slabs' sums (mean first, then the squared deviations from it, as the unsharded layer's
// two-pass variance does), and autograd carries the gradients of those sums back to every slab.
// Statistics are computed in fp32 whatever the input's precision.
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/pimpl.h>

namespace splitseg::shard {

class ShardInstanceNorm3dImpl : public torch::nn::InstanceNorm3dImpl {
public:
  using torch::nn::InstanceNorm3dImpl::InstanceNorm3dImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(ShardInstanceNorm3d);

class ShardBatchNorm3dImpl : public torch::nn::BatchNorm3dImpl {
public:
  using torch::nn::BatchNorm3dImpl::BatchNorm3dImpl;
  torch::Tensor forward(const torch::Tensor& input);
};
TORCH_MODULE(ShardBatchNorm3d);

} // namespace splitseg::shard
