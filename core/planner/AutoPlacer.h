#pragma once
// Chooses which device runs each stage. Order of preference: the placement fits; then its
// predicted step time (StepTime; over ranks, the GPipe schedule's) is shortest, so a CPU takes stages only when the GPUs cannot
// hold them; then the largest per-device peak is smallest; then the fewest bytes cross between
// devices. Exact (branch and bound over every assignment, identical devices deduplicated) up to
// `exactMaxDevices`; beyond that a heuristic, reported as such. When no assignment of whole
// stages fits, it tries sharded stages over every GPU (the full-resolution stages, then every
// stage), each without and with activation checkpointing of all stages.
#include "core/base/CancelToken.h"
#include "core/planner/MemoryPlanner.h"
#include "core/planner/StepTime.h"

#include <cstdint>
#include <string>

namespace splitseg::planner {

struct AutoPlaceResult {
  placement::Placement placement;
  MemoryPlan plan;
  bool exact = true;
  std::string method;          // "exact search" or "heuristic: ..."
  std::int64_t evaluated = 0;  // placements simulated
  std::set<std::string> checkpoint;  // the stages it checkpoints (the request's, or all when needed)
  StepTime time;                     // predicted step time of the chosen placement
};

class AutoPlacer {
public:
  // `cancel`: checked before every placement it simulates (the workstation's Cancel button).
  explicit AutoPlacer(const MemoryPlanner& planner, int exactMaxDevices = 4, const CancelToken* cancel = nullptr)
      : planner_(planner), exactMaxDevices_(exactMaxDevices), cancel_(cancel) {}

  // request.placement is ignored; every device in request.devices may be used. Throws Cancelled
  // when the token is cancelled.
  AutoPlaceResult place(const PlanRequest& request) const;

  // True when `a` is preferred to `b` (plans of `network`) under the order above (speeds from
  // `devices`' kinds). Times within 1% count as equal, and so do peaks.
  static bool better(const MemoryPlan& a, const MemoryPlan& b, const std::vector<DeviceSpec>& devices,
                     const NetworkStructure& network);

private:
  const MemoryPlanner& planner_;
  int exactMaxDevices_;
  const CancelToken* cancel_;
};

// Worst margin over used devices (negative: over capacity by that much).
std::int64_t worstMargin(const MemoryPlan& plan);

} // namespace splitseg::planner
