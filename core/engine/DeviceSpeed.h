#pragma once
// The training speed of a real device, measured instead of taken from the planner's defaults
// (placement/StepTime.cpp: one CPU and one GPU measured once; CPUs differ by several times). A few
// training steps of the run's own network run on the device after a warm-up step, and the
// planner's FLOPs for that step are divided by the median step time; the result goes into
// DeviceSpec::flopsPerSecond, which the step-time prediction and Auto-place then use.
#include "core/run/RunSpec.h"

#include <array>
#include <cstdint>
#include <string>

namespace splitseg::engine {

struct MeasuredSpeed {
  double flopsPerSecond = 0;
  double stepSeconds = 0;  // median of the timed steps
  double stepFlops = 0;    // the planner's count for one such step
  std::array<std::int64_t, 3> patch{};  // x, y, z of the steps measured
};

// The largest patch a speed is measured at: a CPU step of the seed network at base 16 takes a few
// seconds there, so a measurement of 1 + 3 steps stays under half a minute (docs/calibration.md).
constexpr std::int64_t kMeasureVoxels = 96 * 96 * 96;

// The patch to measure a run planned at `planned` with: the planned patch itself, since a CPU's
// speed grows with the patch (ATen gives small single-sample convolutions its slower native
// kernels; docs/calibration.md, "Step time"); when it holds more than maxVoxels, the planned shape
// scaled down to fit, each side a multiple of `divisor` (at least one).
std::array<std::int64_t, 3> measurementPatch(const std::array<std::int64_t, 3>& planned, std::int64_t divisor,
                                             std::int64_t maxVoxels = kMeasureVoxels);

// `run`'s network and precision, one batch of 1 on `device` (a device of this process, such as
// "cpu" or "cuda:0"), patch `patch` (x, y, z), `steps` timed steps after one warm-up.
// Throws DeviceError / InvalidArgument.
MeasuredSpeed measureTrainingSpeed(const run::RunSpec& run, const std::string& device,
                                   const std::array<std::int64_t, 3>& patch, int steps = 3);

} // namespace splitseg::engine
