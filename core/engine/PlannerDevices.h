#pragma once
// The devices of this machine as the memory planner takes them: one home for turning
// detectDevices()'s facts into placement::DeviceSpec (capacity, measured CUDA allowance).
#include "core/engine/Devices.h"
#include "core/placement/MemoryPlanner.h"

#include <vector>

namespace splitseg::engine {

placement::DeviceSpec plannerDevice(const DeviceInfo& device);
// detectDevices(), each through plannerDevice.
std::vector<placement::DeviceSpec> plannerDevices();

} // namespace splitseg::engine
