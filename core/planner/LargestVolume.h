#pragma once
// The largest cube (edge a multiple of the network's size divisor) whose training step fits,
// for a given placement or with auto-placement at every size tried.
#include "core/base/CancelToken.h"
#include "core/planner/AutoPlacer.h"
#include "core/planner/MemoryPlanner.h"

#include <cstdint>

namespace splitseg::planner {

struct LargestVolume {
  std::int64_t edge = 0;      // 0: not even the smallest cube fits
  MemoryPlan plan;            // at `edge` (with its placement)
  MemoryPlan next;            // at the next edge, which does not fit: names the limiting stage
  placement::Placement placement;        // the placement of `plan`
  bool exact = true;          // auto-placement was exact at every size tried
  std::int64_t step = 1;      // edge granularity (the size divisor)
};

// request.size is ignored. With autoPlace, request.placement is ignored too.
// `cancel`: checked before every size it tries (throws Cancelled).
LargestVolume largestCube(const MemoryPlanner& planner, const PlanRequest& request, bool autoPlace,
                          std::int64_t maxEdge = 4096, const CancelToken* cancel = nullptr);

// Inference (request.inference, request.volume set): the largest cubic window. A window larger
// than the volume shrinks to it, so the search stops at wholeVolumeEdge (or at maxEdge when that
// is smaller); an edge of wholeVolumeEdge is one pass over the whole volume. One home for
// `plan --inference --largest`, `infer --window largest` and Review's "Largest that fits".
LargestVolume largestWindow(const MemoryPlanner& planner, const PlanRequest& request, std::int64_t maxEdge = 4096,
                            const CancelToken* cancel = nullptr);
// The volume's longest side rounded up to the network's size divisor.
std::int64_t wholeVolumeEdge(const MemoryPlanner& planner, const PlanRequest& request);

} // namespace splitseg::planner
