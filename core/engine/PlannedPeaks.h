#pragma once
// The planner's memory peak per device for one training step of a run, in the terms the step's
// metrics measure it (StepMetrics::memory, RankStepStats::peakBytes), so the two can be shown
// side by side while the run goes on.
#include "core/model/StagedNetwork.h"
#include "core/run/RunSpec.h"

#include "core/planner/MemoryPlanner.h"

#include <array>
#include <cstdint>
#include <vector>
#include <map>
#include <string>

namespace splitseg::engine {

// Keyed by the planner's device names ("cpu", "cuda:0"; over ranks every device with its rank,
// "r0:cpu", "r1:cuda:0"). Allowances are left out (no allocator sees them); on a CPU the
// parameters and optimizer state too, which exist before a step's counter starts (CUDA's
// allocator peak includes them). Throws what the planner throws.
std::map<std::string, std::int64_t> plannedStepPeaks(model::StagedNetwork& network, const run::RunSpec& spec);
// The planner's inference plan for a volume of `volumeZyx` voxels on the network's grid with the
// run's window, overlap and mirroring, `perPass` windows a pass, on `devices` (their capacities,
// as a caller plans them: engine::plannerDevices, the workstation's device columns). Throws what
// the planner throws.
planner::MemoryPlan plannedInference(model::StagedNetwork& network, const run::RunSpec& spec,
                                       const std::vector<planner::DeviceSpec>& devices,
                                       const std::array<std::int64_t, 3>& volumeZyx, int perPass);
// Each device's tensor peak in `plan` (allowances excluded), the figure a prediction's measured
// peaks (ranks::PeakMeter) are compared with.
std::map<std::string, std::int64_t> tensorPeaks(const planner::MemoryPlan& plan);

// The planner's name for a device a step's metrics report: `device` in one process (rank < 0), else
// rank `rank`'s, "r<rank>:<device>".
std::string plannerDeviceName(int rank, const std::string& device);

} // namespace splitseg::engine
