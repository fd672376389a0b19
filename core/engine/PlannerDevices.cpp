#include "core/engine/PlannerDevices.h"

namespace splitseg::engine {

placement::DeviceSpec plannerDevice(const DeviceInfo& d) {
  placement::DeviceSpec spec;
  spec.name = d.name;
  spec.capacity = d.totalBytes;
  spec.allowance = d.allowanceBytes;  // measured on present CUDA devices, else -1: the planner's default
  spec.planningOnly = d.planningOnly;
  return spec;
}

std::vector<placement::DeviceSpec> plannerDevices() {
  std::vector<placement::DeviceSpec> out;
  for (const auto& d : detectDevices()) out.push_back(plannerDevice(d));
  return out;
}

} // namespace splitseg::engine
