#pragma once
// Out of memory where it really happens, as a check the GPU kit runs (tests/gpu/gpu_checks.cpp)
// and CudaTest runs in CTest. Qt-free.
#include "tests/support/GpuChecks.h"

#include <string>

namespace splitseg::checks {

// A training step and a prediction on `device`, each given less memory than it needs and more
// than what exists before it: on a GPU CUDA's caching allocator capped (setMemoryFraction), on
// "cpu" the run's CPU budget (the rehearsal). Passes when the step fails with an OutOfMemoryError
// naming `device`, leaves the weights, Adam's moments and the step count as they were, and after
// the cap is lifted the next step runs; and when the prediction fails with an OutOfMemoryError
// naming `device` and, after the cap, gives the labels of an uncapped prediction. Figures: each
// one's peak and cap, and the messages.
CheckResult outOfMemoryRecovers(const std::string& device, int edge = 64);

} // namespace splitseg::checks
