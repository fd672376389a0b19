#include "core/planner/LargestVolume.h"
#include "core/base/Error.h"

#include <algorithm>

namespace splitseg::planner {

namespace {
struct Trial {
  MemoryPlan plan;
  placement::Placement placement;
  bool exact = true;
};

Trial tryEdge(const MemoryPlanner& planner, PlanRequest r, bool autoPlace, std::int64_t edge, const CancelToken* cancel) {
  if (cancel && cancel->cancelled()) throw Cancelled();
  r.size = {edge, edge, edge};
  Trial t;
  if (autoPlace) {
    AutoPlaceResult a = AutoPlacer(planner, 4, cancel).place(r);
    t.plan = std::move(a.plan);
    t.placement = std::move(a.placement);
    t.exact = a.exact;
  } else {
    t.plan = planner.plan(r);
    t.placement = r.placement;
  }
  return t;
}
} // namespace

LargestVolume largestCube(const MemoryPlanner& planner, const PlanRequest& request, bool autoPlace,
                          std::int64_t maxEdge, const CancelToken* cancel) {
  LargestVolume out;
  const std::int64_t step = planner.network().sizeDivisor;
  out.step = step;
  // Memory grows with the edge, so fitting is monotone: grow by doubling, then bisect.
  std::int64_t lo = 0, hi = 0;  // multiples of step: lo fits (0 = none), hi does not
  Trial best, fail;
  // Sharded stages need a volume that cuts into their slabs: start at the first edge that does.
  std::int64_t first = 1;
  for (; first <= 64 && first * step <= maxEdge; ++first) {
    try {
      PlanRequest r = request;
      r.size = {first * step, first * step, first * step};
      planner.plan(r);
      break;
    } catch (const InvalidArgument&) {
      if (!request.placement.anySharded()) throw;
    }
  }
  for (std::int64_t k = first;; k *= 2) {
    if (k * step > maxEdge) {
      hi = maxEdge / step + 1;
      break;
    }
    Trial t = tryEdge(planner, request, autoPlace, k * step, cancel);
    out.exact = out.exact && t.exact;
    if (!t.plan.fits) {
      hi = k;
      fail = std::move(t);
      break;
    }
    lo = k;
    best = std::move(t);
  }
  if (lo == 0) hi = 1;  // nothing fits, not even the first edge that cuts into slabs
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    Trial t = tryEdge(planner, request, autoPlace, mid * step, cancel);
    out.exact = out.exact && t.exact;
    if (t.plan.fits) {
      lo = mid;
      best = std::move(t);
    } else {
      hi = mid;
      fail = std::move(t);
    }
  }
  out.edge = lo * step;
  out.plan = std::move(best.plan);
  out.placement = std::move(best.placement);
  out.next = std::move(fail.plan);
  return out;
}

std::int64_t wholeVolumeEdge(const MemoryPlanner& planner, const PlanRequest& request) {
  const std::int64_t step = planner.network().sizeDivisor;
  const std::int64_t longest = std::max({request.volume[0], request.volume[1], request.volume[2]});
  return (longest + step - 1) / step * step;
}

LargestVolume largestWindow(const MemoryPlanner& planner, const PlanRequest& request, std::int64_t maxEdge,
                            const CancelToken* cancel) {
  if (!request.inference) throw InvalidArgument("largestWindow: not an inference request");
  const std::int64_t step = planner.network().sizeDivisor;
  return largestCube(planner, request, false, std::min(wholeVolumeEdge(planner, request), maxEdge / step * step), cancel);
}

} // namespace splitseg::planner
