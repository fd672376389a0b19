#include "core/planner/AutoPlacer.h"
#include "core/base/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

namespace splitseg::planner {

std::int64_t worstMargin(const MemoryPlan& plan) {
  std::int64_t m = std::numeric_limits<std::int64_t>::max();
  for (const auto& d : plan.devices) m = std::min(m, d.margin());
  return m;
}

namespace {
bool preferred(const MemoryPlan& a, double ta, const MemoryPlan& b, double tb) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) {  // neither fits: the one that misses by least
    const auto ma = worstMargin(a), mb = worstMargin(b);
    if (ma != mb) return ma > mb;
  }
  if (std::abs(ta - tb) > 0.01 * std::max(ta, tb)) return ta < tb;
  const double pa = static_cast<double>(a.maxPeak()), pb = static_cast<double>(b.maxPeak());
  if (std::abs(pa - pb) > 0.01 * std::max(pa, pb)) return pa < pb;
  if (a.bytesMoved != b.bytesMoved) return a.bytesMoved < b.bytesMoved;
  return pa < pb;
}
} // namespace

bool AutoPlacer::better(const MemoryPlan& a, const MemoryPlan& b, const std::vector<DeviceSpec>& devices,
                        const NetworkStructure& network) {
  return preferred(a, predictStepTime(a, devices, network).seconds, b, predictStepTime(b, devices, network).seconds);
}

namespace {

class Search {
public:
  Search(const MemoryPlanner& planner, const PlanRequest& request, const CancelToken* cancel)
      : planner_(planner), cancel_(cancel), req_(request), names_(planner.network().stageNames()) {
    const std::size_t nd = req_.devices.size();
    std::vector<int> ranks;
    for (std::size_t d = 0; d < nd; ++d) {
      devices_.push_back(placement::canonicalDevice(req_.devices[d].name));
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
      const int r = placement::processRank(devices_.back());
      const auto at = std::find(ranks.begin(), ranks.end(), r);
      rankOf_.push_back(static_cast<int>(at - ranks.begin()));
      if (at == ranks.end()) ranks.push_back(r);
    }
    // Stages on ranks work at the same time (StepTime's GPipe replay), so the sum of their times
    // is no lower bound on the step; each rank runs its cells one at a time, so the busiest rank's
    // time and an even share of all over the ranks are.
    pipelined_ = ranks.size() > 1;
    busy_.assign(ranks.size(), 0.0);
    // Lower bound per stage: what it holds at the end of forward wherever it runs (its saved
    // activations and persistent state); transfers only add to it. Checkpointed stages may
    // keep nothing of their own, so they contribute only persistent state.
    PlanRequest one = req_;
    one.placement = placement::Placement::uniform(names_, devices_.front());
    const MemoryPlan p = planner_.plan(one);
    for (const auto& s : p.stages) {
      const std::int64_t persistent = s.parameterBytes + s.optimizerBytes;
      bound_.push_back(persistent + (s.checkpointed ? 0 : s.activationBytes));
      // Time bound: the stage at the fastest device's speed (transfers only add).
      double fastest = 0;
      for (const auto& d : req_.devices) fastest = std::max(fastest, flopsPerSecondOf(d, s.precision));
      timeBound_.push_back(s.flops / fastest);
      speed_.emplace_back();
      for (const auto& d : req_.devices) speed_.back().push_back(flopsPerSecondOf(d, s.precision));
    }
  }

  double secondsOf(const MemoryPlan& p) const { return predictStepTime(p, req_.devices, planner_.network()).seconds; }

  void checkCancel() const {
    if (cancel_ && cancel_->cancelled()) throw Cancelled();
  }

  MemoryPlan evaluate(const std::vector<int>& assign) {
    checkCancel();
    PlanRequest r = req_;
    r.placement = placement::Placement::uniform(names_, devices_.front());
    for (std::size_t s = 0; s < assign.size(); ++s) r.placement.assign(names_[s], devices_[assign[s]]);
    ++evaluated_;
    return planner_.plan(r);
  }

  void offer(const std::vector<int>& assign) {
    MemoryPlan p = evaluate(assign);
    const double t = secondsOf(p);
    if (!haveBest_ || preferred(p, t, best_, bestSeconds_)) {
      best_ = std::move(p);
      bestSeconds_ = t;
      bestAssign_ = assign;
      bestPlacement_.reset();
      haveBest_ = true;
    }
  }

  // A whole placement (sharded stages included) with its own checkpointing.
  void offerPlacement(const placement::Placement& placement, const std::set<std::string>& checkpoint) {
    checkCancel();
    PlanRequest r = req_;
    r.placement = placement;
    r.checkpoint = checkpoint;
    MemoryPlan p;
    try {
      p = planner_.plan(r);
    } catch (const InvalidArgument&) {
      return;  // the volume does not cut into these slabs
    }
    ++evaluated_;
    const double t = secondsOf(p);
    if (!haveBest_ || preferred(p, t, best_, bestSeconds_)) {
      best_ = std::move(p);
      bestSeconds_ = t;
      bestPlacement_ = placement;
      bestCheckpoint_ = checkpoint;
      haveBest_ = true;
    }
  }

  // Sharded candidates over every GPU (every device when there is none): the full-resolution
  // stages sharded (the rest where the best whole-stage placement put them), then every stage.
  void sharded() {
    std::vector<std::string> gpus;
    for (std::size_t d = 0; d < devices_.size(); ++d)
      if (req_.devices[d].isCuda()) gpus.push_back(devices_[d]);
    if (gpus.size() < 2) gpus = devices_;
    if (gpus.size() < 2) return;
    std::string entry;
    for (const auto& g : gpus) entry += (entry.empty() ? "" : "+") + g;
    placement::Placement base = placement::Placement::uniform(names_, gpus.front());
    if (!bestAssign_.empty())
      for (std::size_t s = 0; s < names_.size(); ++s) base.assign(names_[s], devices_[bestAssign_[s]]);
    placement::Placement fullRes = base;
    for (const auto& s : fullResolution()) fullRes.assign(s, entry);
    const placement::Placement everyStage = placement::Placement::uniform(names_, entry);
    std::set<std::string> all(names_.begin(), names_.end());
    const std::vector<const placement::Placement*> candidates{&fullRes, &everyStage};
    const std::vector<std::set<std::string>> checkpoints{req_.checkpoint, all};
    for (const auto* p : candidates)
      for (const auto& c : checkpoints) offerPlacement(*p, c);
  }

  bool bestFits() const { return haveBest_ && best_.fits; }
  // The best placement puts a stage on a device that is not a GPU while two or more GPUs exist.
  bool bestLeavesGpus() const {
    int gpus = 0;
    for (const auto& d : req_.devices) gpus += d.isCuda() ? 1 : 0;
    if (!haveBest_ || gpus < 2) return false;
    for (const auto& d : best_.devices)
      if (d.activationBytes > 0 && !DeviceSpec{d.name}.isCuda()) return true;
    return false;
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
    r.placement = placement::Placement::uniform(names_, devices_.front());
    if (bestPlacement_) r.placement = *bestPlacement_;
    else
      for (std::size_t s = 0; s < names_.size(); ++s) r.placement.assign(names_[s], devices_[bestAssign_[s]]);
    r.checkpoint = bestPlacement_ ? bestCheckpoint_ : req_.checkpoint;
    r.time = predictStepTime(best_, req_.devices, planner_.network());
    r.plan = best_;
    r.exact = exact;
    r.method = std::move(method);
    r.evaluated = evaluated_;
    return r;
  }

private:
  double flopsSeconds(std::size_t s, std::size_t d) const { return timeBound_[s] * speedMax(s) / speed_[s][d]; }
  double speedMax(std::size_t s) const { return *std::max_element(speed_[s].begin(), speed_[s].end()); }
  double restBound(std::size_t from) const {
    double t = 0;
    for (std::size_t s = from; s < timeBound_.size(); ++s) t += timeBound_[s];
    return t;
  }
  // Stages at full resolution: those that pool nothing relative to the input (level 0).
  std::vector<std::string> fullResolution() const {
    std::vector<std::string> out;
    std::vector<int> level(names_.size(), 0);
    const auto& stages = planner_.network().stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const auto& st = stages[s];
      int l = st.inputs.empty() || st.inputs[0] == "input" ? 0 : level[planner_.network().indexOf(st.inputs[0])];
      for (const auto& layer : st.layers) l += layer.kind == LayerKind::MaxPool ? 1 : layer.kind == LayerKind::ConvTranspose ? -1 : 0;
      level[s] = std::max(0, l);
      if (level[s] == 0) out.push_back(st.name);
    }
    return out;
  }

  void branch(std::size_t s, std::vector<int>& assign, std::vector<std::int64_t>& load,
              std::vector<int>& used, double time = 0) {
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
      const double spent = time + flopsSeconds(s, d);
      if (haveBest_ && best_.fits) {
        const auto cap = req_.devices[d].capacity;
        if (l > cap) continue;  // cannot fit, and a fitting placement is known
        // Cannot beat the best time: what is placed so far plus the rest at the fastest speed
        // (pipelined: the busiest rank so far, or that total spread over the ranks).
        double lower = spent + restBound(s + 1);
        if (pipelined_) {
          lower /= static_cast<double>(busy_.size());
          for (std::size_t r = 0; r < busy_.size(); ++r)
            lower = std::max(lower, busy_[r] + (static_cast<int>(r) == rankOf_[d] ? flopsSeconds(s, d) : 0.0));
        }
        if (lower > 1.0101 * bestSeconds_) continue;
      }
      assign[s] = static_cast<int>(d);
      load[d] = l;
      busy_[rankOf_[d]] += flopsSeconds(s, d);
      ++used[d];
      branch(s + 1, assign, load, used, spent);
      --used[d];
      busy_[rankOf_[d]] -= flopsSeconds(s, d);
      load[d] -= bound_[s];
      assign[s] = -1;
    }
  }

  const MemoryPlanner& planner_;
  const CancelToken* cancel_;
  PlanRequest req_;
  std::vector<std::string> names_;
  std::vector<std::string> devices_;
  std::vector<std::int64_t> allowance_;
  std::vector<int> klass_;
  std::vector<std::int64_t> bound_;
  std::vector<double> timeBound_;           // per stage: seconds at the fastest device
  bool pipelined_ = false;                  // the devices span two or more ranks
  std::vector<int> rankOf_;                 // per device: index of its rank in busy_
  std::vector<double> busy_;                // per rank: seconds of the stages branch() placed there
  std::vector<std::vector<double>> speed_;  // per stage and device: FLOP/s
  double bestSeconds_ = 0;
  std::optional<placement::Placement> bestPlacement_;  // set when the best came from offerPlacement
  std::set<std::string> bestCheckpoint_;
  MemoryPlan best_;
  std::vector<int> bestAssign_;
  bool haveBest_ = false;
  std::int64_t evaluated_ = 0;
};

} // namespace

AutoPlaceResult AutoPlacer::place(const PlanRequest& request) const {
  if (request.devices.empty()) throw InvalidArgument("auto-placement: no devices");
  Search search(planner_, request, cancel_);
  search.contiguous();  // a good first incumbent makes the bounds bite
  const bool exact = static_cast<int>(request.devices.size()) <= exactMaxDevices_;
  if (exact) search.exact();
  else search.localSearch();
  std::string method = exact ? "exact search" : "heuristic: best contiguous split, then single-stage moves and swaps";
  if (!search.bestFits()) {
    search.sharded();
    method += "; whole stages do not fit, so sharded stages were tried";
  } else if (search.bestLeavesGpus()) {
    // Whole stages fit only with some on the CPU: stages sharded over the GPUs may be faster.
    search.sharded();
    method += "; whole stages fit only with the CPU, so stages sharded over the GPUs were tried too";
  }
  return search.result(exact, method);
}

} // namespace splitseg::planner
