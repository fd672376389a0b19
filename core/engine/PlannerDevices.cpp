#include "core/engine/PlannerDevices.h"

#include <algorithm>

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

std::vector<placement::DeviceSpec> plannerDevices(const placement::Placement& placement) {
  const auto local = plannerDevices();
  std::vector<placement::DeviceSpec> out;
  for (const auto& stage : placement.stages())
    for (const auto& shard : placement.shardsOf(stage)) {
      const auto rd = placement::splitRank(shard);
      if (rd.rank < 0) continue;
      const auto name = placement::canonicalDevice(shard);
      if (std::any_of(out.begin(), out.end(), [&](const placement::DeviceSpec& d) { return d.name == name; })) continue;
      placement::DeviceSpec spec;
      for (const auto& d : local)
        if (d.name == placement::canonicalDevice(rd.device)) spec = d;
      spec.name = name;
      spec.planningOnly = false;
      out.push_back(spec);
    }
  return out.empty() ? local : out;
}

} // namespace splitseg::engine
