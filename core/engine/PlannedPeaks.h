#pragma once
// The planner's memory peak per device for one training step of a run, in the terms the step's
// metrics measure it (StepMetrics::memory, RankStepStats::peakBytes), so the two can be shown
// side by side while the run goes on.
#include "core/model/StagedNetwork.h"
#include "core/run/RunSpec.h"

#include <cstdint>
#include <map>
#include <string>

namespace splitseg::engine {

// Keyed by the planner's device names ("cpu", "cuda:0"; over ranks every device with its rank,
// "r0:cpu", "r1:cuda:0"). Allowances are left out (no allocator sees them); on a CPU the
// parameters and optimizer state too, which exist before a step's counter starts (CUDA's
// allocator peak includes them). Throws what the planner throws.
std::map<std::string, std::int64_t> plannedStepPeaks(model::StagedNetwork& network, const run::RunSpec& spec);
// The planner's name for a device a step's metrics report: `device` in one process (rank < 0), else
// rank `rank`'s, "r<rank>:<device>".
std::string plannerDeviceName(int rank, const std::string& device);

} // namespace splitseg::engine
