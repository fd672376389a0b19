#include "core/engine/PlannedPeaks.h"

#include "core/engine/PlannerDevices.h"
#include "core/model/NetworkStructureOf.h"
#include "core/planner/MemoryPlanner.h"

#include <algorithm>

namespace splitseg::engine {

std::map<std::string, std::int64_t> plannedStepPeaks(model::StagedNetwork& network, const run::RunSpec& spec) {
  const auto names = network.stageNames();
  const auto placement = spec.resolvePlacement(names, "cpu");
  const planner::MemoryPlanner planner(model::networkStructure(network));
  const auto plan = planner.plan(spec.planRequest(names, plannerDevices(placement)));
  const bool ranks = std::any_of(plan.devices.begin(), plan.devices.end(),
                                 [](const planner::DevicePlan& d) { return placement::splitRank(d.name).rank >= 0; });
  std::map<std::string, std::int64_t> out;
  for (const auto& d : plan.devices) {
    const bool cuda = planner::DeviceSpec{d.name}.isCuda();
    // Over ranks a device without a rank is rank 0's.
    const std::string name = ranks && placement::splitRank(d.name).rank < 0 ? plannerDeviceName(0, d.name) : d.name;
    out[name] = d.peak - d.allowance - (cuda ? 0 : d.persistentBytes);
  }
  return out;
}

planner::MemoryPlan plannedInference(model::StagedNetwork& network, const run::RunSpec& spec,
                                       const std::vector<planner::DeviceSpec>& devices,
                                       const std::array<std::int64_t, 3>& volumeZyx, int perPass) {
  const planner::MemoryPlanner planner(model::networkStructure(network));
  return planner.plan(spec.inferencePlanRequest(network.stageNames(), devices, volumeZyx, perPass));
}

std::map<std::string, std::int64_t> tensorPeaks(const planner::MemoryPlan& plan) {
  std::map<std::string, std::int64_t> out;
  for (const auto& d : plan.devices) out[d.name] = d.peak - d.allowance;
  return out;
}

std::string plannerDeviceName(int rank, const std::string& device) {
  return rank < 0 ? device : "r" + std::to_string(rank) + ":" + device;
}

} // namespace splitseg::engine
