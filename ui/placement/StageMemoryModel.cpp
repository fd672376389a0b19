#include "ui/placement/StageMemoryModel.h"

#include "core/engine/PlannerDevices.h"

#include <algorithm>

namespace splitseg::ui {

std::vector<planner::DeviceSpec> StageMemoryModel::devices(const Session& session) {
  std::vector<planner::DeviceSpec> devices;
  for (const auto& d : session.devices()) {
    planner::DeviceSpec spec = engine::plannerDevice(d);
    if (!d.planningOnly)
      if (const auto* speed = session.measuredSpeed(d.name)) spec.flopsPerSecond = speed->flopsPerSecond;
    devices.push_back(spec);
  }
  engine::setRankThreads(devices, session.placement(), session.remoteRanks());  // as the run will start them
  return devices;
}

std::vector<planner::DeviceSpec> StageMemoryModel::inferenceDevices(const Session& session) {
  auto out = devices(session);
  engine::addPlacedDevices(out, session.placement(), session.remoteRanks());
  return out;
}

int StageMemoryModel::inferenceWindowsPerPass(const Session& session) {
  return session.placement().rankCount() > 1 ? std::max(1, session.run().microBatches) : 1;
}

planner::PlanRequest StageMemoryModel::request(const Session& session) {
  auto r = session.run().planRequest(session.stageNames(), devices(session));
  r.placement = session.placement();
  return r;
}

PlacementEstimate StageMemoryModel::estimate(const Session& session) {
  if (session.placement().stages().empty()) return {};
  return estimate(session.structure(), request(session));
}

PlacementEstimate StageMemoryModel::estimate(const std::shared_ptr<const planner::NetworkStructure>& structure,
                                             const planner::PlanRequest& request) {
  PlacementEstimate out;
  if (request.placement.stages().empty()) return out;
  if (!structure) {
    out.error = "the memory planner cannot read this network's structure";
    return out;
  }
  try {
    const planner::MemoryPlanner planner(*structure);
    out.plan = planner.plan(request);
    out.structure = structure;
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  std::map<std::string, const planner::StagePlan*> byName;
  for (const auto& s : out.plan->stages) {
    out.stageBytes[s.name] = s.parameterBytes + s.gradientBytes + s.optimizerBytes + s.activationBytes;
    byName[s.name] = &s;
  }
  for (const auto& d : out.plan->devices) out.deviceBytes[d.name] = d.peak;
  // Each input a stage takes from another device: the producer's output goes forward and its
  // gradient of the same size comes back.
  for (const auto& s : structure->stages) {
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      const auto it = byName.find(s.inputs[i]);
      if (it == byName.end()) continue;  // the network input is loaded where the first stage runs
      const auto& from = it->second->device;
      const auto& to = byName.at(s.name)->device;
      if (from == to) continue;
      CrossTransfer t;
      t.fromStage = s.inputs[i];
      t.toStage = s.name;
      t.fromDevice = from;
      t.toDevice = to;
      t.bytesPerStep = 2 * it->second->outputBytes;
      t.skip = i > 0;
      out.transfers.push_back(t);
    }
  }
  return out;
}

} // namespace splitseg::ui
