#pragma once
// Conversions between Volume (x fastest) and tensors (D, H, W) — the same memory order.
#include "core/data/SampleSource.h"
#include "core/volume/Volume.h"

#include <torch/types.h>

namespace splitseg::engine {

torch::Tensor toTensor(const Volume& v);                 // (D, H, W) float32, copy
torch::Tensor toTensor(Volume&& v);                      // (D, H, W) float32, owns v's voxels (no copy)
torch::Tensor toTensor(const std::vector<Volume>& channels);  // (C, D, H, W)
Volume toVolume(const torch::Tensor& dhw, const Geometry& geometry);  // one copy, to CPU float, any dtype

} // namespace splitseg::engine
