// MemoryPlan's figures from the planner's replays (PlanSetup.h), and its report.
#include "core/planner/PlanSetup.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace splitseg::planner {

std::int64_t MemoryPlan::maxPeak() const {
  std::int64_t m = 0;
  for (const auto& d : devices) m = std::max(m, d.peak);
  return m;
}

double MemoryPlan::maxDeviceFlops() const {
  double m = 0;
  for (const auto& d : devices) m = std::max(m, d.flops);
  return m;
}

std::string MemoryPlan::toJson() const {
  nlohmann::ordered_json j;
  j["mode"] = inference ? "inference" : "training";
  j["size"] = size;
  if (inference) {
    j["volume"] = volume;
    j["windows"] = windows;
    j["host_bytes"] = hostBytes;
  }
  j["batch"] = batch;
  j["micro_batches"] = microBatches;
  j["precision"] = toString(precision);
  j["stage_precision"] = precisionText;
  j["fits"] = fits;
  j["limiting_device"] = limitingDevice;
  j["limiting_stage"] = limitingStage;
  j["bytes_moved"] = bytesMoved;
  j["halo_bytes"] = haloBytes;
  j["offload_bytes"] = offloadBytes;
  j["slabs"] = slabs;
  auto& st = j["stages"] = nlohmann::ordered_json::array();
  for (const auto& s : stages)
    st.push_back({{"name", s.name}, {"device", s.device}, {"parameters", s.parameters},
                  {"parameter_bytes", s.parameterBytes}, {"gradient_bytes", s.gradientBytes},
                  {"optimizer_bytes", s.optimizerBytes}, {"activation_bytes", s.activationBytes},
                  {"transfer_bytes", s.transferBytes}, {"output_bytes", s.outputBytes},
                  {"offload_bytes", s.offloadBytes},
                  {"backward_peak", s.backwardPeak}, {"backward_transient", s.backwardTransient},
                  {"flops", s.flops}, {"checkpointed", s.checkpointed},
                  {"precision", toString(s.precision)}});
  auto& dv = j["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : devices)
    dv.push_back({{"name", d.name}, {"capacity", d.capacity}, {"allowance", d.allowance},
                  {"persistent_bytes", d.persistentBytes}, {"activation_bytes", d.activationBytes},
                  {"transfer_bytes", d.transferBytes}, {"offload_bytes", d.offloadBytes}, {"peak", d.peak}, {"peak_stage", d.peakStage},
                  {"peak_phase", d.peakPhase}, {"flops", d.flops}, {"stages", d.stages},
                  {"fits", d.fits()}, {"margin", d.margin()}});
  return j.dump(2);
}

namespace detail {

// Halos: every 3x3x3 convolution of a sharded stage takes `padding` planes across each inner
// boundary in both directions, and sends their gradients back in backward.
void addHalos(MemoryPlan& plan, const NetworkStructure& network, const PlanRequest& req, const PlanSetup& su,
              const SimRequest& sr) {
  for (const auto& [entry, layout] : su.layouts) plan.slabs[entry] = layout.sizes;
  for (int s = 0; s < static_cast<int>(network.stages.size()); ++s) {
    const auto& name = network.stages[s].name;
    if (!su.placement.isSharded(name)) continue;
    const auto& layout = su.layouts.at(su.placement.entryOf(name));
    const std::int64_t boundaries = static_cast<std::int64_t>(layout.sizes.size()) - 1;
    std::int64_t plane = 1;
    for (int a = 0; a < 3; ++a)
      if (a != su.axis) plane *= su.size[a] >> su.level[s];
    const std::int64_t bytes = req.precision.of(name) == placement::Precision::BF16 ? 2 : 4;
    const int passes = req.inference ? 1 : sr.checkpointed[s] ? 3 : 2;
    for (const auto& l : network.stages[s].layers)
      if (l.kind == LayerKind::Conv && l.padding > 0)
        // Both directions; forward (again when recomputed) and backward.
        plan.haloBytes += 2 * passes * boundaries * l.padding * plane * l.inChannels * bytes * su.batch;
  }
}

void addStages(MemoryPlan& plan, const MemoryPlanner& planner, const PlanRequest& req, const PlanSetup& su,
               const SimRequest& sr, const SimResult& sim) {
  const auto& network = planner.network();
  const std::int64_t optimizerPerParam = req.adam && !req.inference ? 8 : 0;
  for (std::size_t i = 0; i < network.stages.size(); ++i) {
    const auto& ss = sim.stages[i];
    StagePlan s;
    s.name = network.stages[i].name;
    s.device = su.placement.entryOf(s.name);
    s.parameters = ss.parameters;
    s.parameterBytes = ss.parameters * 4;
    s.gradientBytes = req.inference ? 0 : ss.parameters * 4;
    s.optimizerBytes = ss.parameters * optimizerPerParam;
    s.activationBytes = ss.activationBytes * su.activationSets;
    s.transferBytes = ss.transferBytes * su.M;
    s.outputBytes = ss.outputBytes;
    s.offloadBytes = ss.offloadBytes * su.activationSets;
    s.flops = ss.flops * su.M;
    s.checkpointed = sr.checkpointed[i];
    s.precision = sr.bf16[i] ? placement::Precision::BF16 : placement::Precision::FP32;
    const std::int64_t allowance = planner.allowanceFor(req.devices[sr.stageDevice[i]]);
    const auto& dev = sim.devices[sr.stageDevice[i]];
    s.backwardPeak = ss.backwardPeak + allowance + su.heldByOthers(dev, sr.stageDevice[i]);
    s.backwardTransient = ss.backwardTransient;
    plan.stages.push_back(s);
  }
}

namespace {

// Inference: the Inferer's host buffers (InferenceMemory.h) beside the network's tensors, on the
// local process's CPU when a stage runs there.
struct HostSide {
  int hostDevice = -1, inputDevice = -1;
  InferenceHost host;

  // The host's peak: during the pass its buffers sit beside the replay's tensors (the pass's input
  // is the replay's own when it starts on the host), after it the logits come back.
  std::int64_t peak(const PlanSetup& su, const SimDevice& sd, std::int64_t held) const {
    const std::int64_t input = su.grid.whole && host.batch == 0 ? host.image : host.batch;
    const std::int64_t pass =
        sd.peak + held + host.base + host.batch + host.mirrorPass - (inputDevice == hostDevice ? input : 0);
    // Over ranks, rank 0 ends the pass holding every micro-batch's sends (until the flush) beside
    // the logits' parts and, with M > 1, their concatenation (ranks::forwardOverRanks).
    const std::int64_t ranksEnd =
        su.overRanks && !su.spatial && hostDevice >= 0
            ? sd.persistent + host.base + host.batch + host.mirrorPass +
                  su.M * su.sentPerMicro[static_cast<std::size_t>(hostDevice)] + (su.M > 1 ? 2 : 1) * host.logits
            : 0;
    return std::max({pass, ranksEnd, sd.persistent + host.afterPass, sd.persistent + host.end,
                     sd.persistent + host.mirrorAfter});
  }
};

HostSide hostSide(MemoryPlan& plan, const NetworkStructure& network, const PlanRequest& req, const PlanSetup& su,
                  const SimRequest& sr) {
  HostSide h;
  for (std::size_t d = 0; d < su.deviceNames.size(); ++d)
    if (su.deviceNames[d] == "cpu" || su.deviceNames[d] == "r0:cpu") h.hostDevice = static_cast<int>(d);
  for (int s = 0; s < static_cast<int>(network.stages.size()) && h.inputDevice < 0; ++s)
    for (const auto& n : network.stages[s].inputs)
      if (n == "input") h.inputDevice = sr.stageDevice[s];
  if (req.inference) {
    h.host = inferenceHost(su.grid, req.volume, su.batch, network.inChannels, network.outChannels, req.mirror);
    plan.volume = req.volume;
    plan.windows = static_cast<std::int64_t>(su.grid.origins.size());
    plan.hostBytes = std::max({h.host.base + h.host.batch + h.host.mirrorPass, h.host.afterPass, h.host.end,
                               h.host.mirrorAfter});
  }
  return h;
}

// A device's stages and its share of their figures (a sharded stage's, from the first slab's
// replay, scaled by this slab's share).
void addStageShares(DevicePlan& dp, const MemoryPlan& plan, const PlanSetup& su) {
  for (const auto& s : plan.stages) {
    const auto shards = placement::splitShards(s.device);
    const auto at = std::find(shards.begin(), shards.end(), dp.name);
    if (at == shards.end()) continue;
    double share = 1.0;
    if (shards.size() > 1) {
      const auto& layout = su.layouts.at(s.device);
      share = static_cast<double>(layout.sizes[at - shards.begin()]) / static_cast<double>(layout.sizes.front());
    }
    dp.stages.push_back(s.name);
    dp.activationBytes += static_cast<std::int64_t>(s.activationBytes * share);
    dp.transferBytes += static_cast<std::int64_t>(s.transferBytes * share);
    dp.offloadBytes += static_cast<std::int64_t>(s.offloadBytes * share);
    dp.flops += s.flops * share;
  }
}

} // namespace

void addDevices(MemoryPlan& plan, const MemoryPlanner& planner, const PlanRequest& req, const PlanSetup& su,
                const SimRequest& sr, const SimResult& sim, const std::vector<SimResult>& others) {
  const auto& network = planner.network();
  const HostSide host = hostSide(plan, network, req, su, sr);
  std::int64_t worst = std::numeric_limits<std::int64_t>::max();
  plan.fits = true;
  for (std::size_t d = 0; d < req.devices.size(); ++d) {
    DevicePlan dp;
    dp.name = su.deviceNames[d];
    addStageShares(dp, plan, su);
    if (dp.stages.empty()) continue;
    // The view where this device peaks (sharded stages: the slab it holds).
    const SimDevice* best = &sim.devices[d];
    const int index = static_cast<int>(d);
    for (const auto& o : others)
      if (su.microPeak(o.devices[d], index) > su.microPeak(*best, index)) best = &o.devices[d];
    const auto& sd = *best;
    dp.capacity = req.devices[d].capacity;
    dp.allowance = planner.allowanceFor(req.devices[d]);
    dp.persistentBytes = sd.persistent;
    dp.peak = su.microPeak(sd, index) + dp.allowance;
    if (req.inference && static_cast<int>(d) == host.hostDevice)
      dp.peak = std::max(dp.peak, host.peak(su, sd, su.heldByOthers(sd, index)) + dp.allowance);
    if (su.spatial && !req.inference && placement::splitRank(dp.name).rank == 0 && !req.devices[d].isCuda()) {
      // Training: rank 0 draws the whole batch (fp32 input, int64 labels) and keeps it through the
      // step, beside each micro-batch's predicted labels for the step's Dice; the replay holds only
      // this rank's slabs. On a GPU they stay in host memory (RankMemoryTest, DistTrainingTest).
      const std::int64_t voxels = su.size[0] * su.size[1] * su.size[2];
      dp.peak += std::int64_t{su.batch} * voxels * (network.inChannels * 4 + 8) + std::int64_t{su.batch} * voxels * 8;
    }
    dp.peakStage = sd.peakStage >= 0 ? network.stages[sd.peakStage].name : "";
    dp.peakPhase = toString(sd.peakPhase);
    plan.fits = plan.fits && dp.fits();
    if (dp.margin() < worst) {
      worst = dp.margin();
      plan.limitingDevice = dp.name;
      plan.limitingStage = dp.peakStage;
    }
    plan.offloadBytes += dp.offloadBytes;
    plan.devices.push_back(std::move(dp));
  }
}

} // namespace detail

} // namespace splitseg::planner
