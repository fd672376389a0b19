#include "core/planner/MemoryPlanner.h"
#include "core/base/Error.h"
#include "core/planner/InferenceMemory.h"
#include "core/planner/PlanSetup.h"
#include "core/planner/StepSimulator.h"

#include <algorithm>

namespace splitseg::planner {

namespace {

using detail::PlanSetup;

// The request checked against the network; the replay's input size, batch and placement.
void checkRequest(const NetworkStructure& network, const PlanRequest& req, PlanSetup& su) {
  if (req.devices.empty()) throw InvalidArgument("planner: no devices to plan for");
  if (req.batch < 1) throw InvalidArgument("planner: batch must be at least 1");
  if (req.microBatches < 1 || req.microBatches > req.batch)
    throw InvalidArgument("planner: micro-batches must be 1..batch");
  su.inference = req.inference;
  // Inference: the pass's input is a window (or the whole volume padded to the divisor).
  su.grid = req.inference ? inferenceGrid(req.volume, req.size, network.sizeDivisor, req.overlap) : InferenceGrid{};
  su.size = req.inference ? su.grid.window : req.size;
  for (auto n : su.size)
    if (n < 1 || n % network.sizeDivisor != 0)
      throw InvalidArgument("planner: input size " + std::to_string(n) + " is not a positive multiple of " +
                            std::to_string(network.sizeDivisor));
  // A pass holds at most as many windows as there are.
  su.batch = req.inference ? static_cast<int>(std::min<std::size_t>(req.batch, su.grid.origins.size())) : req.batch;
  const auto names = network.stageNames();
  su.placement = req.placement.stages().empty() ? placement::Placement::uniform(names, req.devices.front().name)
                                                : req.placement;
  if (su.placement.stages() != names) throw InvalidArgument("planner: placement is for another network");
  for (const auto& c : req.checkpoint)
    if (network.indexOf(c) < 0) throw InvalidArgument("planner: cannot checkpoint unknown stage '" + c + "'");
  for (const auto& [c, p] : req.precision.stages)
    if (network.indexOf(c) < 0) throw InvalidArgument("planner: precision given for unknown stage '" + c + "'");
  for (const auto& d : req.devices) su.deviceNames.push_back(placement::canonicalDevice(d.name));
  // Resolution level of each stage's output (pools go down, transposed convolutions up).
  const int ns = static_cast<int>(network.stages.size());
  su.level.assign(ns, 0);
  for (int s = 0; s < ns; ++s) {
    const auto& st = network.stages[s];
    int l = st.inputs.empty() || st.inputs[0] == "input" ? 0 : su.level[network.indexOf(st.inputs[0])];
    for (const auto& layer : st.layers) l += layer.kind == LayerKind::MaxPool ? 1 : layer.kind == LayerKind::ConvTranspose ? -1 : 0;
    su.level[s] = std::max(0, l);
  }
}

// Sharded entries and their slabs, cut as the executor cuts them.
void cutShards(const NetworkStructure& network, const PlanRequest& req, PlanSetup& su) {
  su.axis = static_cast<int>(req.shardAxis);
  const auto& placement = su.placement;
  if (!placement.anySharded()) return;
  std::map<std::string, int> deepest;
  std::map<std::string, std::string> firstStage;
  int overall = 0;
  for (int s = 0; s < static_cast<int>(network.stages.size()); ++s) {
    const auto& name = network.stages[s].name;
    if (!placement.isSharded(name)) continue;
    int l = su.level[s];
    for (const auto& in : network.stages[s].inputs)
      if (in != "input") l = std::max(l, su.level[network.indexOf(in)]);
    const std::string& entry = placement.entryOf(name);
    deepest[entry] = std::max(deepest[entry], l);
    firstStage.emplace(entry, name);
    overall = std::max(overall, l);
  }
  const std::int64_t multiple = std::int64_t{1} << overall;
  for (const auto& [entry, l] : deepest) {
    const int k = static_cast<int>(placement::splitShards(entry).size());
    placement::ShardLayout layout;
    auto given = req.shardSlabs.find(entry);
    if (given != req.shardSlabs.end()) {
      layout.axis = req.shardAxis;
      layout.sizes = given->second;
    } else {
      try {
        layout = placement::ShardLayout::even(req.shardAxis, su.size[su.axis], k, multiple);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("stage " + firstStage.at(entry) + ": " + e.what());
      }
    }
    if (static_cast<int>(layout.sizes.size()) != k)
      throw InvalidArgument("stage " + firstStage.at(entry) + ": slab sizes do not match the devices of " + entry);
    layout.check(su.size[su.axis], multiple, l, firstStage.at(entry));
    su.layouts[entry] = layout;
    su.groupOf.emplace(entry, static_cast<int>(su.groupOf.size()));
    su.views = std::max(su.views, k);
  }
}

// How the micro-batches run. With M micro-batches the step is replayed for the largest
// micro-batch; each device then also holds what the other M-1 micro-batches left on it at the end
// of their forward (GPipe runs every forward before the first backward), which the replay reports
// as endOfForward - persistent. Stages on ranks run the pipeline trainer's way; sharded over
// ranks, the spatial trainer runs one graph per slab as one process does.
void chooseSchedule(const NetworkStructure& network, const PlanRequest& req, const PlannerOptions& options,
                    PlanSetup& su) {
  su.overRanks = std::any_of(su.deviceNames.begin(), su.deviceNames.end(),
                             [](const std::string& d) { return placement::splitRank(d).rank >= 0; });
  if (su.layouts.empty() && su.overRanks)
    for (const auto& d : su.deviceNames)
      (req.inference ? su.inferenceRank : su.deviceRank).push_back(placement::processRank(d));  // "cpu": rank 0's
  // Every stage sharded over the same ranks (ranks::SpatialTrainer) runs its micro-batches one after
  // another instead, each through its backward before the next forward: one micro-batch's
  // activations at a time, the parameters' gradients kept from the first backward on.
  const auto& placement = su.placement;
  su.spatial = !su.layouts.empty();
  for (const auto& s : network.stages)
    su.spatial = su.spatial && placement.entryOf(s.name) == placement.entryOf(network.stages.front().name);
  if (su.spatial)
    for (const auto& d : placement.shardsOf(network.stages.front().name))
      su.spatial = su.spatial && placement::splitRank(d).rank >= 0;
  // One process's Inferer runs a pass as one batch, and so does ranks::SpatialInferer; the
  // pipeline over ranks runs it as micro-batches.
  su.M = req.inference && (!su.overRanks || su.spatial) ? 1 : std::min(req.microBatches, su.batch);
  su.micro = (su.batch + su.M - 1) / su.M;
  std::int64_t gradientBytes = 0;  // every spatial rank holds the whole network
  for (const auto& s : network.stages)
    for (const auto& l : s.layers) gradientBytes += l.parameters * 4;
  su.keptGradients = su.spatial && su.M > 1 && !options.gradientsPersist ? gradientBytes : 0;
  // Inference over ranks (ranks::PipelineInferer): the sends stay until the pass's flush, so the
  // last micro-batch runs beside the others' (filled in after the replay).
  su.sentPerMicro.assign(su.deviceNames.size(), 0);
  su.activationSets = su.spatial ? 1 : su.M;
}

// One replay per slab index: in view j every sharded stage runs its j-th slab on its j-th device
// (a stage with fewer slabs repeats one), unsharded stages run whole. A device's peak is its
// largest over the views.
detail::SimRequest simRequest(const NetworkStructure& network, const PlannerOptions& options, const PlanRequest& req,
                              const PlanSetup& su, int view) {
  detail::SimRequest sr;
  sr.network = &network;
  sr.options = &options;
  sr.size = su.size;
  sr.batch = su.micro;
  sr.wholeBatch = su.batch;
  sr.inference = req.inference;
  sr.adam = req.adam && !req.inference;
  sr.offload = req.offload && !req.inference;
  sr.shardDim = su.axis;
  for (const auto& d : req.devices) {
    sr.deviceIsCuda.push_back(d.isCuda());
    sr.deviceThreads.push_back(d.cpuThreads);
  }
  sr.deviceRank = su.deviceRank;
  sr.inferenceRank = su.inferenceRank;
  for (const auto& s : network.stages) {
    const auto shards = su.placement.shardsOf(s.name);
    const std::size_t j = static_cast<std::size_t>(view) % shards.size();
    const std::string& dev = shards[j];
    auto it = std::find(su.deviceNames.begin(), su.deviceNames.end(), dev);
    if (it == su.deviceNames.end())
      throw DeviceError("planner: stage " + s.name + " is placed on " + dev + ", which is not among the devices planned for");
    sr.stageDevice.push_back(static_cast<int>(it - su.deviceNames.begin()));
    sr.checkpointed.push_back(req.checkpoint.count(s.name) && !req.inference ? 1 : 0);
    sr.bf16.push_back(req.precision.of(s.name) == placement::Precision::BF16 ? 1 : 0);
    // Only the one-process Trainer converts weights: unsharded fp32 stages on the local CPU.
    // Inference (engine::Inferer, ranks::PipelineInferer on every rank) converts the bf16
    // stages' weights too.
    sr.channelsLast.push_back(req.cpuChannelsLast && (sr.bf16.back() == 0 || req.inference) && shards.size() == 1 &&
                                      (!su.overRanks || req.inference) && !sr.deviceIsCuda[sr.stageDevice.back()]
                                  ? 1 : 0);
    if (!su.layouts.empty()) {
      const bool sharded = shards.size() > 1;
      sr.stageSlab.push_back(sharded ? su.layouts.at(su.placement.entryOf(s.name)).sizes[j] : 0);
      sr.stageGroup.push_back(sharded ? su.groupOf.at(su.placement.entryOf(s.name)) : -1);
      sr.stageShards.push_back(static_cast<int>(shards.size()));
    }
  }
  return sr;
}

// Inference over ranks: each output read on another rank is sent once (every remote reader gets
// the same host tensor); the head's logits go to rank 0 as fp32.
void countSends(const NetworkStructure& network, const detail::SimRequest& sr, const detail::SimResult& sim,
                PlanSetup& su) {
  const int ns = static_cast<int>(network.stages.size());
  const auto rankOf = [&](int dev) { return placement::processRank(su.deviceNames[static_cast<std::size_t>(dev)]); };
  for (int s = 0; s < ns; ++s) {
    const int dev = sr.stageDevice[s];
    const int rank = rankOf(dev);
    bool remote = s == ns - 1 && rank != 0;
    for (int t = s + 1; t < ns; ++t)
      for (const auto& in : network.stages[t].inputs)
        remote = remote || (in == network.stages[s].name && rankOf(sr.stageDevice[t]) != rank);
    if (remote)
      su.sentPerMicro[static_cast<std::size_t>(dev)] += sim.stages[s].outputBytes * (sr.bf16[s] && s == ns - 1 ? 2 : 1);
  }
}

} // namespace

MemoryPlanner::MemoryPlanner(NetworkStructure network, PlannerOptions options)
    : network_(std::move(network)), options_(options) {
  if (network_.stages.empty()) throw InvalidArgument("planner: network has no stages");
}

std::int64_t MemoryPlanner::allowanceFor(const DeviceSpec& d) const {
  if (d.allowance >= 0) return d.allowance;
  return d.isCuda() ? options_.cudaContextBytes + options_.cudnnWorkspaceBytes : options_.cpuAllowanceBytes;
}

MemoryPlan MemoryPlanner::plan(const PlanRequest& req) const {
  PlanSetup su;
  checkRequest(network_, req, su);
  cutShards(network_, req, su);
  chooseSchedule(network_, req, options_, su);
  const detail::SimRequest sr = simRequest(network_, options_, req, su, 0);
  const detail::SimResult sim = detail::simulateStep(sr);
  std::vector<detail::SimResult> others;
  for (int v = 1; v < su.views; ++v) others.push_back(detail::simulateStep(simRequest(network_, options_, req, su, v)));
  if (req.inference && su.overRanks && !su.spatial) countSends(network_, sr, sim, su);

  MemoryPlan plan;
  plan.inference = req.inference;
  plan.size = su.size;
  plan.batch = su.batch;
  plan.microBatches = su.M;
  plan.precision = req.precision.fallback;
  plan.precisionText = req.precision.toString(network_.stageNames());
  plan.bytesMoved = sim.bytesMoved * su.M;
  for (const auto& o : others) plan.bytesMoved += o.bytesMoved * su.M;
  detail::addHalos(plan, network_, req, su, sr);
  detail::addStages(plan, *this, req, su, sr, sim);
  detail::addDevices(plan, *this, req, su, sr, sim, others);
  return plan;
}

} // namespace splitseg::planner
