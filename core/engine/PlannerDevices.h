#pragma once
// The devices of this machine as the memory planner takes them: one home for turning
// detectDevices()'s facts into planner::DeviceSpec (capacity, measured CUDA allowance).
#include "core/engine/Devices.h"
#include "core/planner/MemoryPlanner.h"
#include "core/placement/Placement.h"

#include <set>
#include <vector>

namespace splitseg::engine {

planner::DeviceSpec plannerDevice(const DeviceInfo& device);
// detectDevices(), each through plannerDevice.
std::vector<planner::DeviceSpec> plannerDevices();
// For a placement over ranks: this host's devices plus each rank's device it names ("r1:cuda:0"),
// taken to be like this host's device of that name (another host's may differ); capacity unknown
// (0) where this host lacks it. Without ranks, plannerDevices().
std::vector<planner::DeviceSpec> plannerDevices(const placement::Placement& placement);
// Adds each device `placement` names that `devices` lacks, a rank's taken to be like the device of
// that name in `devices` (else this host's): "r0:cpu" like "cpu"; then setRankThreads.
void addPlacedDevices(std::vector<planner::DeviceSpec>& devices, const placement::Placement& placement,
                      const std::set<int>& elsewhere = {});
// A placement over ranks: every CPU device of a rank on this host, rank 0's ("cpu", "r0:cpu")
// included, with the threads each rank there runs with (rankThreads of the ranks `placement` names
// less those `elsewhere`, on other machines: `launch` and the workstation give them to their
// workers, ranks::trainAsRankZero / inferAsRankZero take them for rank 0). A rank elsewhere keeps
// the threads it was given (0: the planner's default). Without ranks, nothing changes.
void setRankThreads(std::vector<planner::DeviceSpec>& devices, const placement::Placement& placement,
                    const std::set<int>& elsewhere = {});

} // namespace splitseg::engine
