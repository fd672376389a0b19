#include "core/engine/PlannerDevices.h"

#include <algorithm>

namespace splitseg::engine {

planner::DeviceSpec plannerDevice(const DeviceInfo& d) {
  planner::DeviceSpec spec;
  spec.name = d.name;
  spec.capacity = d.totalBytes;
  spec.allowance = d.allowanceBytes;  // measured on present CUDA devices, else -1: the planner's default
  spec.planningOnly = d.planningOnly;
  spec.cpuThreads = d.threads;
  return spec;
}

std::vector<planner::DeviceSpec> plannerDevices() {
  std::vector<planner::DeviceSpec> out;
  for (const auto& d : detectDevices()) out.push_back(plannerDevice(d));
  return out;
}

std::vector<planner::DeviceSpec> plannerDevices(const placement::Placement& placement) {
  auto out = plannerDevices();
  const auto devices = placement.devices();
  if (std::none_of(devices.begin(), devices.end(), [](const std::string& d) { return placement::splitRank(d).rank >= 0; }))
    return out;
  addPlacedDevices(out, placement);
  return out;
}

void addPlacedDevices(std::vector<planner::DeviceSpec>& devices, const placement::Placement& placement,
                      const std::set<int>& elsewhere) {
  std::vector<planner::DeviceSpec> local;  // this host's, detected only when `devices` lacks one
  for (const auto& shard : placement.devices()) {
    const auto name = placement::canonicalDevice(shard);
    const auto named = [](const std::string& n) { return [n](const planner::DeviceSpec& d) { return d.name == n; }; };
    if (std::any_of(devices.begin(), devices.end(), named(name))) continue;
    const auto like = placement::canonicalDevice(placement::splitRank(shard).device);
    planner::DeviceSpec spec;
    if (auto it = std::find_if(devices.begin(), devices.end(), named(like)); it != devices.end()) spec = *it;
    else {
      if (local.empty()) local = plannerDevices();
      if (auto lt = std::find_if(local.begin(), local.end(), named(like)); lt != local.end()) spec = *lt;
    }
    spec.name = name;
    spec.planningOnly = false;
    devices.push_back(spec);
  }
  setRankThreads(devices, placement, elsewhere);
}

void setRankThreads(std::vector<planner::DeviceSpec>& devices, const placement::Placement& placement,
                    const std::set<int>& elsewhere) {
  const int world = placement.rankCount();
  if (world <= 1) return;
  int here = world;
  for (const int r : elsewhere)
    if (r > 0 && r < world) --here;
  for (auto& d : devices)
    if (!d.isCuda() && !elsewhere.count(placement::splitRank(d.name).rank)) d.cpuThreads = rankThreads(here);
}

} // namespace splitseg::engine
