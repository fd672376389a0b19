#pragma once
// What a layer of a sharded stage needs from its neighbours, and the thread-local handle through
// which layers reach it. A stage sharded over k devices runs k times at once, once per slab; the
// executor installs one ShardComm per slab (ShardScope) while that slab's forward runs, and the
// shard-aware layers (HaloConv3d, ShardNorm3d) call it: the 3x3x3 convolutions for a halo, the
// normalisation layers for sums over all slabs. Without a scope the layers behave exactly like
// LibTorch's. Two transports implement it: threads of one process (engine::ThreadShardGroup)
// and ranks over c10d.
#include <torch/types.h>

namespace splitseg::shard {

class ShardComm {
public:
  virtual ~ShardComm() = default;
  virtual int index() const = 0;   // this slab's position, 0 = first along the axis
  virtual int count() const = 0;
  virtual torch::Device device() const = 0;  // where this slab's tensors live
  // Tensor dimension the slabs are cut along (2 = D, 3 = H, 4 = W).
  virtual int dim() const = 0;
  // The `planes` planes of the neighbours' x that border this slab along dim(): {the previous
  // slab's last planes, the next slab's first planes}; zeros at the volume's borders (what the
  // unsharded convolution's padding reads there). Every slab must call it for the same layer, in
  // the same order. Differentiable: the halo's gradient flows back to the neighbour's planes.
  virtual std::pair<torch::Tensor, torch::Tensor> exchangeHalo(const torch::Tensor& x, std::int64_t planes) = 0;
  // Elementwise sum of t over all slabs (t has the same shape on every slab), on device().
  // Differentiable; every slab gets the same result.
  virtual torch::Tensor allReduceSum(const torch::Tensor& t) = 0;
  // A parameter or buffer of the stage as a tensor on device(): itself when it is there already,
  // else a differentiable copy (gradients flow back to the parameter on its own device).
  virtual torch::Tensor local(const torch::Tensor& parameter) = 0;
  // Whether this slab owns the stage's buffers (running statistics): only slab 0 updates them.
  bool ownsBuffers() const { return index() == 0; }
};

// The ShardComm of the slab running on this thread, or nullptr outside a sharded stage.
ShardComm* current();

// Installs a ShardComm for this thread for the scope's lifetime (nesting restores the outer one).
class ShardScope {
public:
  explicit ShardScope(ShardComm* comm);
  ~ShardScope();
  ShardScope(const ShardScope&) = delete;
  ShardScope& operator=(const ShardScope&) = delete;

private:
  ShardComm* previous_;
};

} // namespace splitseg::shard
