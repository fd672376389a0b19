#pragma once
// Internal to the planner: the transient memory of one CPU convolution (column buffers of
// ATen's native kernels, oneDNN's reorders and scratchpads), forward and backward.
#include "core/planner/MemoryPlanner.h"

#include <array>
#include <cstdint>
#include <utility>

namespace splitseg::planner::detail {

struct ConvTensor {
  std::int64_t channels = 0;
  std::array<std::int64_t, 3> dims{};
  int dtype = 4;  // bytes per element
  bool channelsLast = false;  // NDHWC strides (a channels-last convolution's output and what follows it)
  bool requiresGrad = true;   // input only: backward makes its gradient (not for the network's input)
};

struct ConvScratch {
  std::int64_t forward = 0;   // bytes beyond the layer's output
  std::int64_t backward = 0;  // bytes beyond the layer's input gradient
  bool outputChannelsLast = false;
};

// `wholeFactor`: how many times larger the tensor whose kernel a layer that follows its whole
// (LayerSpec::followsWhole) runs is: the slab count when the cut is along D or H, times the whole
// batch over the micro-batch; 1 for a whole tensor. `channelsLastWeights`: the layer's weights
// are channels-last (fp32 only; PlanRequest::cpuChannelsLast). `inference`: no gradients, where
// shard::callsOneDnn takes channels-last tensors as they are (the whole factor applies to them too).
ConvScratch cpuConvScratch(const LayerSpec& layer, const ConvTensor& in, const ConvTensor& out, int batch,
                           const PlannerOptions& options, std::int64_t wholeFactor = 1, bool channelsLastWeights = false,
                           bool inference = false);

} // namespace splitseg::planner::detail
