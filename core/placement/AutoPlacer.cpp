#include "core/placement/AutoPlacer.h"
#include "core/base/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace splitseg::placement {

std::int64_t worstMargin(const MemoryPlan& plan) {
  std::int64_t m = std::numeric_limits<std::int64_t>::max();
  for (const auto& d : plan.devices) m = std::min(m, d.margin());
  return m;
}

bool AutoPlacer::better(const MemoryPlan& a, const MemoryPlan& b) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) {  // neither fits: the one that misses by least
    const auto ma = worstMargin(a), mb = worstMargin(b);
    if (ma != mb) return ma > mb;
  }
  const double pa = static_cast<double>(a.maxPeak()), pb = static_cast<double>(b.maxPeak());
  if (std::abs(pa - pb) > 0.01 * std::max(pa, pb)) return pa < pb;
  const double fa = a.maxDeviceFlops(), fb = b.maxDeviceFlops();
  if (std::abs(fa - fb) > 1e-9 * std::max(fa, fb)) return fa < fb;
  if (a.bytesMoved != b.bytesMoved) return a.bytesMoved < b.bytesMoved;
  return pa < pb;
}

namespace {

class Search {
public:
  Search(const MemoryPlanner& planner, const PlanRequest& request)
      : planner_(planner), req_(request), names_(planner.network().stageNames()) {
    const std::size_t nd = req_.devices.size();
    for (std::size_t d = 0; d < nd; ++d) {
      devices_.push_back(canonicalDevice(req_.devices[d].name));
      allowance_.push_back(planner.allowanceFor(req_.devices[d]));
      // Devices with the same kind, capacity and allowance are interchangeable.
      int cls = static_cast<int>(d);
      for (std::size_t e = 0; e < d; ++e)
        if (req_.devices[e].capacity == req_.devices[d].capacity && allowance_[e] == allowance_[d] &&
            req_.devices[e].isCuda() == req_.devices[d].isCuda()) {
          cls = klass_[e];
          break;
        }
      klass_.push_back(cls);
    }
    // Lower bound per stage: what it holds at the end of forward wherever it runs (its saved
    // activations and persistent state); transfers only add to it. Checkpointed stages may
    // keep nothing of their own, so they contribute only persistent state.
    PlanRequest one = req_;
    one.placement = Placement::uniform(names_, devices_.front());
    const MemoryPlan p = planner_.plan(one);
    for (const auto& s : p.stages) {
      const std::int64_t persistent = s.parameterBytes + s.optimizerBytes;
      bound_.push_back(persistent + (s.checkpointed ? 0 : s.activationBytes));
    }
  }

  MemoryPlan evaluate(const std::vector<int>& assign) {
    PlanRequest r = req_;
    r.placement = Placement::uniform(names_, devices_.front());
    for (std::size_t s = 0; s < assign.size(); ++s) r.placement.assign(names_[s], devices_[assign[s]]);
    ++evaluated_;
    return planner_.plan(r);
  }

  void offer(const std::vector<int>& assign) {
    MemoryPlan p = evaluate(assign);
    if (!haveBest_ || AutoPlacer::better(p, best_)) {
      best_ = std::move(p);
      bestAssign_ = assign;
      haveBest_ = true;
    }
  }

  // Every split of the stage order into consecutive runs, runs on distinct devices in order.
  void contiguous() {
    const int ns = static_cast<int>(names_.size()), nd = static_cast<int>(devices_.size());
    std::vector<int> assign(ns, 0);
    for (unsigned cuts = 0; cuts < (1u << (ns - 1)); ++cuts) {
      int dev = 0;
      bool ok = true;
      for (int s = 0; s < ns; ++s) {
        if (s > 0 && (cuts >> (s - 1)) & 1u) ++dev;
        if (dev >= nd) { ok = false; break; }
        assign[s] = dev;
      }
      if (ok) offer(assign);
    }
  }

  // Moves of one stage and swaps of two until nothing improves.
  void localSearch() {
    const int ns = static_cast<int>(names_.size()), nd = static_cast<int>(devices_.size());
    bool improved = true;
    while (improved) {
      improved = false;
      for (int s = 0; s < ns && !improved; ++s)
        for (int d = 0; d < nd && !improved; ++d) {
          if (bestAssign_[s] == d) continue;
          auto a = bestAssign_;
          a[s] = d;
          const auto before = bestAssign_;
          offer(a);
          improved = bestAssign_ != before;
        }
      for (int s = 0; s < ns && !improved; ++s)
        for (int t = s + 1; t < ns && !improved; ++t) {
          if (bestAssign_[s] == bestAssign_[t]) continue;
          auto a = bestAssign_;
          std::swap(a[s], a[t]);
          const auto before = bestAssign_;
          offer(a);
          improved = bestAssign_ != before;
        }
    }
  }

  void exact() {
    std::vector<int> assign(names_.size(), -1);
    std::vector<std::int64_t> load(devices_.size(), 0);
    for (std::size_t d = 0; d < devices_.size(); ++d) load[d] = allowance_[d];
    std::vector<int> used(devices_.size(), 0);
    branch(0, assign, load, used);
  }

  AutoPlaceResult result(bool exact, std::string method) {
    AutoPlaceResult r;
    r.placement = Placement::uniform(names_, devices_.front());
    for (std::size_t s = 0; s < names_.size(); ++s) r.placement.assign(names_[s], devices_[bestAssign_[s]]);
    r.plan = best_;
    r.exact = exact;
    r.method = std::move(method);
    r.evaluated = evaluated_;
    return r;
  }

private:
  void branch(std::size_t s, std::vector<int>& assign, std::vector<std::int64_t>& load,
              std::vector<int>& used) {
    if (s == names_.size()) {
      offer(assign);
      return;
    }
    for (std::size_t d = 0; d < devices_.size(); ++d) {
      // Symmetry: among unused interchangeable devices only the first is tried.
      if (!used[d]) {
        bool earlier = false;
        for (std::size_t e = 0; e < d; ++e)
          if (!used[e] && klass_[e] == klass_[d]) earlier = true;
        if (earlier) continue;
      }
      const std::int64_t l = load[d] + bound_[s];
      if (haveBest_ && best_.fits) {
        const auto cap = req_.devices[d].capacity;
        if (l > cap) continue;  // cannot fit, and a fitting placement is known
        if (l > 1.0102 * static_cast<double>(best_.maxPeak())) continue;  // cannot beat the best peak (1% tie band)
      }
      assign[s] = static_cast<int>(d);
      load[d] = l;
      ++used[d];
      branch(s + 1, assign, load, used);
      --used[d];
      load[d] -= bound_[s];
      assign[s] = -1;
    }
  }

  const MemoryPlanner& planner_;
  PlanRequest req_;
  std::vector<std::string> names_;
  std::vector<std::string> devices_;
  std::vector<std::int64_t> allowance_;
  std::vector<int> klass_;
  std::vector<std::int64_t> bound_;
  MemoryPlan best_;
  std::vector<int> bestAssign_;
  bool haveBest_ = false;
  std::int64_t evaluated_ = 0;
};

} // namespace

AutoPlaceResult AutoPlacer::place(const PlanRequest& request) const {
  if (request.devices.empty()) throw InvalidArgument("auto-placement: no devices");
  Search search(planner_, request);
  search.contiguous();  // a good first incumbent makes the bounds bite
  if (static_cast<int>(request.devices.size()) <= exactMaxDevices_) {
    search.exact();
    return search.result(true, "exact search");
  }
  search.localSearch();
  return search.result(false, "heuristic: best contiguous split, then single-stage moves and swaps");
}

} // namespace splitseg::placement
