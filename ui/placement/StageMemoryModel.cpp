#include "ui/placement/StageMemoryModel.h"

#include <cmath>

namespace splitseg::ui {

namespace {
std::int64_t voxelsAt(const RunSettings& s, int level) {
  std::int64_t v = 1;
  for (auto d : s.patch) v *= std::max<std::int64_t>(1, d >> level);
  return v;
}
double elementBytes(const RunSettings& s, const std::string& stage) { return s.precisionOf(stage) == "bf16" ? 2.0 : 4.0; }
} // namespace

placement::PlanRequest StageMemoryModel::request(const Session& session) {
  const auto& st = session.runSettings();
  placement::PlanRequest r;
  r.size = {st.patch[2], st.patch[1], st.patch[0]};  // D, H, W
  r.batch = st.batch;
  r.precision = placement::precisionFromString(st.precision);
  for (const auto& [stage, p] : st.stagePrecision) r.stagePrecision[stage] = placement::precisionFromString(p);
  r.checkpoint = st.checkpointStages;
  r.placement = session.placement();
  for (const auto& d : session.devices()) {
    placement::DeviceSpec spec;
    spec.name = d.name;
    spec.capacity = d.totalBytes;
    spec.planningOnly = d.planningOnly;
    spec.allowance = d.allowanceBytes;  // measured on present CUDA devices, else the planner's default
    r.devices.push_back(spec);
  }
  return r;
}

PlacementEstimate StageMemoryModel::estimate(const Session& session) {
  PlacementEstimate out;
  if (session.placement().stages().empty()) return out;
  if (const auto structure = session.structure()) {
    try {
      const placement::MemoryPlanner planner(*structure);
      out.plan = planner.plan(request(session));
      for (const auto& s : out.plan->stages)
        out.stageBytes[s.name] = s.parameterBytes + s.gradientBytes + s.optimizerBytes + s.activationBytes;
      for (const auto& d : out.plan->devices) out.deviceBytes[d.name] = d.peak;
      out.fromPlanner = true;
    } catch (const std::exception&) {
      out.plan.reset();  // e.g. a size the network cannot take: fall back to the estimate
    }
  }
  if (!out.fromPlanner) analytic(session, out);
  transfers(session, out);
  return out;
}

void StageMemoryModel::analytic(const Session& session, PlacementEstimate& out) {
  const auto& settings = session.runSettings();
  const auto& placement = session.placement();
  std::map<std::string, const StageInfo*> byName;
  for (const auto& s : session.stages()) byName[s.name] = &s;
  for (const auto& s : session.stages()) {
    const double elem = elementBytes(settings, s.name);
    double inputElems = 0;
    for (const auto& in : s.inputs) {
      const auto it = byName.find(in);
      const auto ch = it == byName.end() ? s.inChannels : it->second->outChannels;
      inputElems += double(ch) * voxelsAt(settings, it == byName.end() ? 0 : it->second->level) * settings.batch;
    }
    // Two conv+ReLU pairs save about four tensors of the output width; a checkpointed stage
    // keeps only its inputs. Weights, gradients and Adam's moments stay fp32.
    const bool cp = settings.checkpointStages.count(s.name) > 0;
    const double act = inputElems + (cp ? 0.0 : 4.0 * double(s.outChannels) * voxelsAt(settings, s.level) * settings.batch);
    out.stageBytes[s.name] = static_cast<std::int64_t>(act * elem + double(s.parameters) * 16.0);
    out.deviceBytes[placement.deviceOf(s.name)] += out.stageBytes[s.name];
  }
}

void StageMemoryModel::transfers(const Session& session, PlacementEstimate& out) {
  const auto& settings = session.runSettings();
  const auto& placement = session.placement();
  std::map<std::string, const StageInfo*> byName;
  for (const auto& s : session.stages()) byName[s.name] = &s;
  for (const auto& s : session.stages()) {
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      const auto it = byName.find(s.inputs[i]);
      if (it == byName.end()) continue;  // the network input is loaded where the first stage runs
      const double elem = elementBytes(settings, s.inputs[i]);  // the producer's precision
      const auto& from = placement.deviceOf(s.inputs[i]);
      const auto& to = placement.deviceOf(s.name);
      if (from == to) continue;
      CrossTransfer t;
      t.fromStage = s.inputs[i];
      t.toStage = s.name;
      t.fromDevice = from;
      t.toDevice = to;
      // The activation goes forward, its gradient of the same size comes back.
      t.bytesPerStep = static_cast<std::int64_t>(2.0 * double(it->second->outChannels) *
                                                 voxelsAt(settings, it->second->level) * settings.batch * elem);
      t.skip = s.name.rfind("dec", 0) == 0 && i > 0;  // decoder input 1 is its encoder twin
      out.transfers.push_back(t);
      if (!out.fromPlanner) out.deviceBytes[to] += t.bytesPerStep / 2;
    }
  }
}

} // namespace splitseg::ui
