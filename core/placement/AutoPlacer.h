#pragma once
// Chooses which device runs each stage. Order of preference: the placement fits; then the
// largest per-device peak is smallest; then compute (FLOPs) is most even; then the fewest bytes
// cross between devices. Exact (branch and bound over every assignment, identical devices
// deduplicated) up to `exactMaxDevices`; beyond that a heuristic, reported as such.
#include "core/placement/MemoryPlanner.h"

#include <cstdint>
#include <string>

namespace splitseg::placement {

struct AutoPlaceResult {
  Placement placement;
  MemoryPlan plan;
  bool exact = true;
  std::string method;          // "exact search" or "heuristic: ..."
  std::int64_t evaluated = 0;  // placements simulated
};

class AutoPlacer {
public:
  explicit AutoPlacer(const MemoryPlanner& planner, int exactMaxDevices = 4)
      : planner_(planner), exactMaxDevices_(exactMaxDevices) {}

  // request.placement is ignored; every device in request.devices may be used.
  AutoPlaceResult place(const PlanRequest& request) const;

  // True when `a` is preferred to `b` under the order above. Peaks within 1% count as equal so
  // that compute balance and traffic can decide between near-identical memory plans.
  static bool better(const MemoryPlan& a, const MemoryPlan& b);

private:
  const MemoryPlanner& planner_;
  int exactMaxDevices_;
};

// Worst margin over used devices (negative: over capacity by that much).
std::int64_t worstMargin(const MemoryPlan& plan);

} // namespace splitseg::placement
