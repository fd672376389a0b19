#include "core/placement/MemoryPlanner.h"
#include "core/base/Error.h"
#include "core/placement/InferenceMemory.h"
#include "core/placement/StepSimulator.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace splitseg::placement {


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

MemoryPlanner::MemoryPlanner(NetworkStructure network, PlannerOptions options)
    : network_(std::move(network)), options_(options) {
  if (network_.stages.empty()) throw InvalidArgument("planner: network has no stages");
}

std::int64_t MemoryPlanner::allowanceFor(const DeviceSpec& d) const {
  if (d.allowance >= 0) return d.allowance;
  return d.isCuda() ? options_.cudaContextBytes + options_.cudnnWorkspaceBytes : options_.cpuAllowanceBytes;
}

MemoryPlan MemoryPlanner::plan(const PlanRequest& req) const {
  if (req.devices.empty()) throw InvalidArgument("planner: no devices to plan for");
  if (req.batch < 1) throw InvalidArgument("planner: batch must be at least 1");
  if (req.microBatches < 1 || req.microBatches > req.batch)
    throw InvalidArgument("planner: micro-batches must be 1..batch");
  // Inference: the pass's input is a window (or the whole volume padded to the divisor).
  const InferenceGrid grid = req.inference ? inferenceGrid(req.volume, req.size, network_.sizeDivisor, req.overlap)
                                           : InferenceGrid{};
  const std::array<std::int64_t, 3> size = req.inference ? grid.window : req.size;
  for (auto n : size)
    if (n < 1 || n % network_.sizeDivisor != 0)
      throw InvalidArgument("planner: input size " + std::to_string(n) + " is not a positive multiple of " +
                            std::to_string(network_.sizeDivisor));
  // A pass holds at most as many windows as there are.
  const int batch = req.inference ? static_cast<int>(std::min<std::size_t>(req.batch, grid.origins.size())) : req.batch;
  const auto names = network_.stageNames();
  Placement placement = req.placement.stages().empty()
                            ? Placement::uniform(names, req.devices.front().name)
                            : req.placement;
  if (placement.stages() != names) throw InvalidArgument("planner: placement is for another network");
  for (const auto& c : req.checkpoint)
    if (network_.indexOf(c) < 0) throw InvalidArgument("planner: cannot checkpoint unknown stage '" + c + "'");
  for (const auto& [c, p] : req.precision.stages)
    if (network_.indexOf(c) < 0) throw InvalidArgument("planner: precision given for unknown stage '" + c + "'");
  const StagePrecisions& precisions = req.precision;

  std::vector<std::string> deviceNames;
  for (const auto& d : req.devices) deviceNames.push_back(canonicalDevice(d.name));
  const int ns = static_cast<int>(network_.stages.size());
  // Resolution level of each stage's output (pools go down, transposed convolutions up).
  std::vector<int> level(ns, 0);
  for (int s = 0; s < ns; ++s) {
    const auto& st = network_.stages[s];
    int l = st.inputs.empty() || st.inputs[0] == "input" ? 0 : level[network_.indexOf(st.inputs[0])];
    for (const auto& layer : st.layers) l += layer.kind == LayerKind::MaxPool ? 1 : layer.kind == LayerKind::ConvTranspose ? -1 : 0;
    level[s] = std::max(0, l);
  }
  // Sharded entries and their slabs, cut as the executor cuts them.
  std::map<std::string, ShardLayout> layouts;
  std::map<std::string, int> groupOf;
  int views = 1;
  const int axis = static_cast<int>(req.shardAxis);
  if (placement.anySharded()) {
    std::map<std::string, int> deepest;
    std::map<std::string, std::string> firstStage;
    int overall = 0;
    for (int s = 0; s < ns; ++s) {
      const auto& name = network_.stages[s].name;
      if (!placement.isSharded(name)) continue;
      int l = level[s];
      for (const auto& in : network_.stages[s].inputs)
        if (in != "input") l = std::max(l, level[network_.indexOf(in)]);
      const std::string& entry = placement.entryOf(name);
      deepest[entry] = std::max(deepest[entry], l);
      firstStage.emplace(entry, name);
      overall = std::max(overall, l);
    }
    const std::int64_t multiple = std::int64_t{1} << overall;
    for (const auto& [entry, l] : deepest) {
      const int k = static_cast<int>(splitShards(entry).size());
      ShardLayout layout;
      auto given = req.shardSlabs.find(entry);
      if (given != req.shardSlabs.end()) {
        layout.axis = req.shardAxis;
        layout.sizes = given->second;
      } else {
        try {
          layout = ShardLayout::even(req.shardAxis, size[axis], k, multiple);
        } catch (const InvalidArgument& e) {
          throw InvalidArgument("stage " + firstStage.at(entry) + ": " + e.what());
        }
      }
      if (static_cast<int>(layout.sizes.size()) != k)
        throw InvalidArgument("stage " + firstStage.at(entry) + ": slab sizes do not match the devices of " + entry);
      layout.check(size[axis], multiple, l, firstStage.at(entry));
      layouts[entry] = layout;
      groupOf.emplace(entry, static_cast<int>(groupOf.size()));
      views = std::max(views, k);
    }
  }
  // With M micro-batches the step is replayed for the largest micro-batch; each device then also
  // holds what the other M-1 micro-batches left on it at the end of their forward (GPipe runs every
  // forward before the first backward), which the replay reports as endOfForward - persistent.
  // Stages on ranks run the pipeline trainer's way; sharded over ranks, the spatial trainer runs
  // one graph per slab as one process does.
  const bool overRanks = std::any_of(deviceNames.begin(), deviceNames.end(),
                                     [](const std::string& d) { return splitRank(d).rank >= 0; });
  std::vector<int> deviceRank;
  std::vector<int> inferenceRank;
  if (layouts.empty() && overRanks)
    for (const auto& d : deviceNames) (req.inference ? inferenceRank : deviceRank).push_back(processRank(d));  // "cpu": rank 0's
  // Every stage sharded over the same ranks (dist::SpatialTrainer) runs its micro-batches one after
  // another instead, each through its backward before the next forward: one micro-batch's
  // activations at a time, the parameters' gradients kept from the first backward on.
  bool spatial = !layouts.empty();
  for (const auto& s : network_.stages)
    spatial = spatial && placement.entryOf(s.name) == placement.entryOf(network_.stages.front().name);
  if (spatial)
    for (const auto& d : placement.shardsOf(network_.stages.front().name)) spatial = spatial && splitRank(d).rank >= 0;
  // One process's Inferer runs a pass as one batch, and so does dist::SpatialInferer; the
  // pipeline over ranks runs it as micro-batches.
  const int M = req.inference && (!overRanks || spatial) ? 1 : std::min(req.microBatches, batch);
  const int micro = (batch + M - 1) / M;
  std::int64_t gradientBytes = 0;  // every spatial rank holds the whole network
  for (const auto& s : network_.stages)
    for (const auto& l : s.layers) gradientBytes += l.parameters * 4;
  const std::int64_t keptGradients = spatial && M > 1 && !options_.gradientsPersist ? gradientBytes : 0;
  // Inference over ranks (dist::PipelineInferer): what a device sends another rank per
  // micro-batch; the sends stay until the pass's flush, so the last micro-batch runs beside the
  // others' (filled in after the replay).
  std::vector<std::int64_t> sentPerMicro(deviceNames.size(), 0);
  // What the other M-1 micro-batches add to a device's peak (see above).
  auto heldByOthers = [M, spatial, keptGradients, &req, &sentPerMicro](const detail::SimDevice& d, int index) -> std::int64_t {
    if (req.inference) return std::int64_t{M - 1} * sentPerMicro[static_cast<std::size_t>(index)];
    if (spatial) return keptGradients;
    return std::int64_t{M - 1} * std::max<std::int64_t>(0, d.endOfForward - d.persistent);
  };
  auto microPeak = [&heldByOthers](const detail::SimDevice& d, int index) { return d.peak + heldByOthers(d, index); };
  const int activationSets = spatial ? 1 : M;  // micro-batches whose activations a device holds at once
  // One replay per slab index: in view j every sharded stage runs its j-th slab on its j-th device
  // (a stage with fewer slabs repeats one), unsharded stages run whole. A device's peak is its
  // largest over the views.
  auto request = [&](int view) {
    detail::SimRequest sr;
    sr.network = &network_;
    sr.options = &options_;
    sr.size = size;
    sr.batch = micro;
    sr.wholeBatch = batch;
    sr.inference = req.inference;
    sr.adam = req.adam && !req.inference;
    sr.offload = req.offload && !req.inference;
    sr.shardDim = axis;
    for (const auto& d : req.devices) {
      sr.deviceIsCuda.push_back(d.isCuda());
      sr.deviceThreads.push_back(d.cpuThreads);
    }
    sr.deviceRank = deviceRank;
    sr.inferenceRank = inferenceRank;
    for (const auto& s : network_.stages) {
      const auto shards = placement.shardsOf(s.name);
      const std::size_t j = static_cast<std::size_t>(view) % shards.size();
      const std::string& dev = shards[j];
      auto it = std::find(deviceNames.begin(), deviceNames.end(), dev);
      if (it == deviceNames.end())
        throw DeviceError("planner: stage " + s.name + " is placed on " + dev + ", which is not among the devices planned for");
      sr.stageDevice.push_back(static_cast<int>(it - deviceNames.begin()));
      sr.checkpointed.push_back(req.checkpoint.count(s.name) && !req.inference ? 1 : 0);
      sr.bf16.push_back(precisions.of(s.name) == Precision::BF16 ? 1 : 0);
      // Only the one-process Trainer converts weights: unsharded fp32 stages on the local CPU.
      // Inference (engine::Inferer, dist::PipelineInferer on every rank) converts the bf16
      // stages' weights too.
      sr.channelsLast.push_back(req.cpuChannelsLast && (sr.bf16.back() == 0 || req.inference) && shards.size() == 1 &&
                                        (!overRanks || req.inference) && !sr.deviceIsCuda[sr.stageDevice.back()]
                                    ? 1 : 0);
      if (!layouts.empty()) {
        const bool sharded = shards.size() > 1;
        sr.stageSlab.push_back(sharded ? layouts.at(placement.entryOf(s.name)).sizes[j] : 0);
        sr.stageGroup.push_back(sharded ? groupOf.at(placement.entryOf(s.name)) : -1);
        sr.stageShards.push_back(static_cast<int>(shards.size()));
      }
    }
    return sr;
  };
  const detail::SimRequest sr = request(0);
  const detail::SimResult sim = detail::simulateStep(sr);
  std::vector<detail::SimResult> others;
  for (int v = 1; v < views; ++v) others.push_back(detail::simulateStep(request(v)));
  if (req.inference && overRanks && !spatial) {
    // Each output read on another rank is sent once (every remote reader gets the same host
    // tensor); the head's logits go to rank 0 as fp32.
    for (int s = 0; s < ns; ++s) {
      const int dev = sr.stageDevice[s];
      const int rank = processRank(deviceNames[static_cast<std::size_t>(dev)]);
      bool remote = s == ns - 1 && rank != 0;
      for (int t = s + 1; t < ns; ++t)
        for (const auto& in : network_.stages[t].inputs)
          remote = remote || (in == network_.stages[s].name &&
                              processRank(deviceNames[static_cast<std::size_t>(sr.stageDevice[t])]) != rank);
      if (remote) sentPerMicro[static_cast<std::size_t>(dev)] += sim.stages[s].outputBytes * (sr.bf16[s] && s == ns - 1 ? 2 : 1);
    }
  }

  MemoryPlan plan;
  plan.inference = req.inference;
  plan.size = size;
  plan.batch = batch;
  plan.microBatches = M;
  plan.precision = req.precision.fallback;
  plan.precisionText = precisions.toString(names);
  plan.bytesMoved = sim.bytesMoved * M;
  for (const auto& o : others) plan.bytesMoved += o.bytesMoved * M;
  // Halos: every 3x3x3 convolution of a sharded stage takes `padding` planes across each inner
  // boundary in both directions, and sends their gradients back in backward.
  for (const auto& [entry, layout] : layouts) plan.slabs[entry] = layout.sizes;
  for (int s = 0; s < ns; ++s) {
    const auto& name = network_.stages[s].name;
    if (!placement.isSharded(name)) continue;
    const auto& layout = layouts.at(placement.entryOf(name));
    const std::int64_t boundaries = static_cast<std::int64_t>(layout.sizes.size()) - 1;
    std::int64_t plane = 1;
    for (int a = 0; a < 3; ++a)
      if (a != axis) plane *= size[a] >> level[s];
    const std::int64_t bytes = precisions.of(name) == Precision::BF16 ? 2 : 4;
    const int passes = req.inference ? 1 : sr.checkpointed[s] ? 3 : 2;
    for (const auto& l : network_.stages[s].layers)
      if (l.kind == LayerKind::Conv && l.padding > 0)
        // Both directions; forward (again when recomputed) and backward.
        plan.haloBytes += 2 * passes * boundaries * l.padding * plane * l.inChannels * bytes * batch;
  }
  const std::int64_t optimizerPerParam = req.adam && !req.inference ? 8 : 0;
  for (std::size_t i = 0; i < network_.stages.size(); ++i) {
    const auto& ss = sim.stages[i];
    StagePlan s;
    s.name = network_.stages[i].name;
    s.device = placement.entryOf(s.name);
    s.parameters = ss.parameters;
    s.parameterBytes = ss.parameters * 4;
    s.gradientBytes = req.inference ? 0 : ss.parameters * 4;
    s.optimizerBytes = ss.parameters * optimizerPerParam;
    s.activationBytes = ss.activationBytes * activationSets;
    s.transferBytes = ss.transferBytes * M;
    s.outputBytes = ss.outputBytes;
    s.offloadBytes = ss.offloadBytes * activationSets;
    s.flops = ss.flops * M;
    s.checkpointed = sr.checkpointed[i];
    s.precision = sr.bf16[i] ? Precision::BF16 : Precision::FP32;
    const std::int64_t allowance = allowanceFor(req.devices[sr.stageDevice[i]]);
    const auto& dev = sim.devices[sr.stageDevice[i]];
    s.backwardPeak = ss.backwardPeak + allowance + heldByOthers(dev, sr.stageDevice[i]);
    s.backwardTransient = ss.backwardTransient;
    plan.stages.push_back(s);
  }
  // Inference: the Inferer's host buffers (InferenceMemory.h) beside the network's tensors, on the
  // local process's CPU when a stage runs there.
  int hostDevice = -1, inputDevice = -1;
  for (std::size_t d = 0; d < deviceNames.size(); ++d)
    if (deviceNames[d] == "cpu" || deviceNames[d] == "r0:cpu") hostDevice = static_cast<int>(d);
  for (int s = 0; s < ns && inputDevice < 0; ++s)
    for (const auto& n : network_.stages[s].inputs)
      if (n == "input") inputDevice = sr.stageDevice[s];
  InferenceHost host;
  if (req.inference) {
    host = inferenceHost(grid, req.volume, batch, network_.inChannels, network_.outChannels, req.mirror);
    plan.volume = req.volume;
    plan.windows = static_cast<std::int64_t>(grid.origins.size());
    plan.hostBytes = std::max({host.base + host.batch + host.mirrorPass, host.afterPass, host.end, host.mirrorAfter});
  }
  // The host's peak: during the pass its buffers sit beside the replay's tensors (the pass's input
  // is the replay's own when it starts on the host), after it the logits come back.
  auto hostPeak = [&](const detail::SimDevice& sd, std::int64_t held) {
    const std::int64_t input = grid.whole && host.batch == 0 ? host.image : host.batch;
    const std::int64_t pass =
        sd.peak + held + host.base + host.batch + host.mirrorPass - (inputDevice == hostDevice ? input : 0);
    // Over ranks, rank 0 ends the pass holding every micro-batch's sends (until the flush) beside
    // the logits' parts and, with M > 1, their concatenation (dist::forwardOverRanks).
    const std::int64_t ranksEnd =
        overRanks && !spatial && hostDevice >= 0
            ? sd.persistent + host.base + host.batch + host.mirrorPass +
                  M * sentPerMicro[static_cast<std::size_t>(hostDevice)] + (M > 1 ? 2 : 1) * host.logits
            : 0;
    return std::max({pass, ranksEnd, sd.persistent + host.afterPass, sd.persistent + host.end,
                     sd.persistent + host.mirrorAfter});
  };
  std::int64_t worst = std::numeric_limits<std::int64_t>::max();
  plan.fits = true;
  for (std::size_t d = 0; d < req.devices.size(); ++d) {
    DevicePlan dp;
    dp.name = deviceNames[d];
    for (const auto& s : plan.stages) {
      const auto shards = splitShards(s.device);
      const auto at = std::find(shards.begin(), shards.end(), dp.name);
      if (at == shards.end()) continue;
      // A sharded stage's figures (from the first slab's replay) scaled by this slab's share.
      double share = 1.0;
      if (shards.size() > 1) {
        const auto& layout = layouts.at(s.device);
        share = static_cast<double>(layout.sizes[at - shards.begin()]) / static_cast<double>(layout.sizes.front());
      }
      dp.stages.push_back(s.name);
      dp.activationBytes += static_cast<std::int64_t>(s.activationBytes * share);
      dp.transferBytes += static_cast<std::int64_t>(s.transferBytes * share);
      dp.offloadBytes += static_cast<std::int64_t>(s.offloadBytes * share);
      dp.flops += s.flops * share;
    }
    if (dp.stages.empty()) continue;
    // The view where this device peaks (sharded stages: the slab it holds).
    const detail::SimDevice* best = &sim.devices[d];
    const int index = static_cast<int>(d);
    for (const auto& o : others)
      if (microPeak(o.devices[d], index) > microPeak(*best, index)) best = &o.devices[d];
    const auto& sd = *best;
    dp.capacity = req.devices[d].capacity;
    dp.allowance = allowanceFor(req.devices[d]);
    dp.persistentBytes = sd.persistent;
    dp.peak = microPeak(sd, index) + dp.allowance;
    if (req.inference && static_cast<int>(d) == hostDevice) dp.peak = std::max(dp.peak, hostPeak(sd, heldByOthers(sd, index)) + dp.allowance);
    if (spatial && !req.inference && splitRank(dp.name).rank == 0 && !req.devices[d].isCuda()) {
      // Training: rank 0 draws the whole batch (fp32 input, int64 labels) and keeps it through the
      // step, beside each micro-batch's predicted labels for the step's Dice; the replay holds only
      // this rank's slabs. On a GPU they stay in host memory. Until 2026-12-06 one micro-batch's
      // input and labels were taken to be in the replay: rank 0 measured that much over its plan
      // (RankMemoryTest -0.9% to -3.2%; through the CLI, 32^3 base 8 batch 2, +5.0%).
      const std::int64_t voxels = size[0] * size[1] * size[2];
      dp.peak += std::int64_t{batch} * voxels * (network_.inChannels * 4 + 8) + std::int64_t{batch} * voxels * 8;
    }
    dp.peakStage = sd.peakStage >= 0 ? network_.stages[sd.peakStage].name : "";
    dp.peakPhase = detail::toString(sd.peakPhase);
    plan.fits = plan.fits && dp.fits();
    if (dp.margin() < worst) {
      worst = dp.margin();
      plan.limitingDevice = dp.name;
      plan.limitingStage = dp.peakStage;
    }
    plan.offloadBytes += dp.offloadBytes;
    plan.devices.push_back(std::move(dp));
  }
  return plan;
}

} // namespace splitseg::placement
