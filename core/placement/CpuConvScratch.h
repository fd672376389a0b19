#pragma once
// Internal to the planner: the transient memory of one CPU convolution (column buffers of
// ATen's native kernels, oneDNN's reorders and scratchpads), forward and backward.
#include "core/placement/MemoryPlanner.h"

#include <array>
#include <cstdint>
#include <utility>

namespace splitseg::placement::detail {

struct ConvTensor {
  std::int64_t channels = 0;
  std::array<std::int64_t, 3> dims{};
  int dtype = 4;  // bytes per element
};

// (forward, backward) bytes beyond the layer's output (forward) or input gradient (backward).
// `wholeFactor`: how many times larger the tensor whose kernel a layer that follows its whole
// (LayerSpec::followsWhole) runs is: the slab count when the cut is along D or H, times the whole
// batch over the micro-batch; 1 for a whole tensor.
std::pair<std::int64_t, std::int64_t> cpuConvScratch(const LayerSpec& layer, const ConvTensor& in,
                                                     const ConvTensor& out, int batch,
                                                     const PlannerOptions& options, std::int64_t wholeFactor = 1);

} // namespace splitseg::placement::detail
