#pragma once
// Internal to MemoryPlanner::plan: what it derives from a request around its replays, shared by
// its phases (MemoryPlanner.cpp: the request, the shards, the schedule and the replays;
// PlanReport.cpp: the plan's halos, stages and devices from the replays).
#include "core/planner/InferenceMemory.h"
#include "core/planner/MemoryPlanner.h"
#include "core/planner/StepSimulator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace splitseg::planner::detail {

struct PlanSetup {
  bool inference = false;
  InferenceGrid grid;                  // inference: the windows
  std::array<std::int64_t, 3> size{};  // the replay's input (inference: the window or padded volume)
  int batch = 1;                       // inference: at most the windows there are
  placement::Placement placement;      // the request's, or every stage on devices[0]
  std::vector<std::string> deviceNames;  // canonical, as PlanRequest::devices
  std::vector<int> level;              // per stage: its output's resolution level
  // Sharded entries and their slabs, cut as the executor cuts them; one replay per slab index.
  std::map<std::string, placement::ShardLayout> layouts;
  std::map<std::string, int> groupOf;
  int views = 1;
  int axis = 0;
  bool overRanks = false;  // some device names a rank
  bool spatial = false;    // every stage sharded over the same ranks (ranks::SpatialTrainer)
  std::vector<int> deviceRank, inferenceRank;  // SimRequest's
  int M = 1;               // micro-batches
  int micro = 1;           // the largest micro-batch, which the replay runs
  std::int64_t keptGradients = 0;  // spatial: the weights' gradients kept from the first backward on
  // Inference over ranks: what a device sends another rank per micro-batch (after the replay).
  std::vector<std::int64_t> sentPerMicro;
  int activationSets = 1;  // micro-batches whose activations a device holds at once

  // What the other M-1 micro-batches add to a device's peak.
  std::int64_t heldByOthers(const SimDevice& d, int index) const {
    if (inference) return std::int64_t{M - 1} * sentPerMicro[static_cast<std::size_t>(index)];
    if (spatial) return keptGradients;
    return std::int64_t{M - 1} * std::max<std::int64_t>(0, d.endOfForward - d.persistent);
  }
  std::int64_t microPeak(const SimDevice& d, int index) const { return d.peak + heldByOthers(d, index); }
};

// The plan's figures from the replays (PlanReport.cpp): `sim` is view 0's, `others` the rest.
void addHalos(MemoryPlan& plan, const NetworkStructure& network, const PlanRequest& req, const PlanSetup& su,
              const SimRequest& sr);
void addStages(MemoryPlan& plan, const MemoryPlanner& planner, const PlanRequest& req, const PlanSetup& su,
               const SimRequest& sr, const SimResult& sim);
void addDevices(MemoryPlan& plan, const MemoryPlanner& planner, const PlanRequest& req, const PlanSetup& su,
                const SimRequest& sr, const SimResult& sim, const std::vector<SimResult>& others);

} // namespace splitseg::planner::detail
