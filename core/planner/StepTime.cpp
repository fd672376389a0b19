#include "core/planner/StepTime.h"
#include "core/planner/Calibration.h"
#include "core/base/Error.h"
#include "core/placement/PipelineOrder.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace splitseg::planner {

namespace {
namespace cal = calibration;
// Measured, not datasheet figures: the planner's FLOPs of a step divided by the median step time
// measured for it (Calibration.h). CPUs differ widely: `plan --measure-speed` measures the CPU it
// runs on (engine/DeviceSpeed).
constexpr double kCudaFp32FlopsPerSecond = cal::kSeed256StepFlops / cal::kCudaFp32Seed256StepSeconds;
constexpr double kCudaBf16FlopsPerSecond = cal::kSeed256StepFlops / cal::kCudaBf16Seed256StepSeconds;
constexpr double kCpuFlopsPerSecond = cal::kCpuBenchStepFlops / cal::kCpuBenchStepSeconds;
// Links: GPU peer copies over NVLink are faster but not every machine has NVLink, so the PCIe
// figure is used for them too.
constexpr double kPcieBytesPerSecond = cal::kPcieBytesPerSecond;
constexpr double kRankBytesPerSecond = cal::kRankBytesPerSecond;
constexpr double kHostBytesPerSecond = cal::kHostBytesPerSecond;

// The rank of each stage when the stages run as a pipeline over ranks (two or more ranks, none
// sharded: a sharded stage over ranks runs in the spatial trainer); empty otherwise.
std::vector<int> pipelineOwners(const MemoryPlan& plan) {
  std::vector<int> owner;
  std::set<int> ranks;
  for (const auto& s : plan.stages) {
    if (placement::splitShards(s.device).size() > 1) return {};
    const int r = placement::processRank(s.device);
    owner.push_back(r);
    ranks.insert(r);
  }
  return ranks.size() > 1 ? owner : std::vector<int>{};
}

// Replays the GPipe schedule: every rank runs its cells in its PipelineOrder, forward then
// backward; a cell starts when its rank is free and what it waits for has arrived (sends do not
// block the sender, as Comm's sends do not). Returns the finish time; adds each rank's compute to
// t.busySeconds.
double replayPipeline(const MemoryPlan& plan, const NetworkStructure& network, const std::vector<int>& owner,
                      const std::vector<double>& stageSeconds, const std::vector<DeviceSpec>& devices, StepTime& t) {
  const int S = static_cast<int>(plan.stages.size());
  const int M = std::max(1, plan.microBatches);
  const placement::PipelineOrder order(owner, M);
  // The plan's per-stage figures are M times its largest micro-batch's (MemoryPlanner).
  const auto sizes = placement::PipelineOrder::microSizes(std::max(plan.batch, M), M);
  std::vector<std::vector<int>> producers(S), consumers(S);
  for (int s = 0; s < S; ++s)
    for (const auto& in : network.stages[s].inputs) {
      const int p = network.indexOf(in);
      if (p < 0) continue;  // the network input, there before the step
      producers[s].push_back(p);
      consumers[p].push_back(s);
    }
  auto share = [&](int m) { return static_cast<double>(sizes[m]) / sizes.front(); };
  // The micro-batch's share of a stage's output crossing from `from` to `to` (0 on one rank).
  auto carry = [&](int stage, int from, int to, int m) {
    if (owner[from] == owner[to]) return 0.0;
    return static_cast<double>(plan.stages[stage].outputBytes) * share(m) /
           linkBytesPerSecond(plan.stages[from].device, plan.stages[to].device, devices);
  };
  // Convolutions count 2 MACs forward and twice that backward; a recomputed stage runs its forward again.
  auto forwardPart = [&](int s) { return plan.stages[s].checkpointed ? 0.25 : 1.0 / 3.0; };
  std::vector<std::vector<double>> fwd(S, std::vector<double>(M, -1)), bwd = fwd;
  std::map<int, std::vector<std::pair<bool, placement::PipelineCell>>> cells;  // rank -> (backward?, cell) in order
  std::map<int, double> clock;
  for (const int r : std::set<int>(owner.begin(), owner.end())) {
    for (const auto& c : order.forward(r)) cells[r].push_back({false, c});
    for (const auto& c : order.backward(r)) cells[r].push_back({true, c});
    clock[r] = 0;
  }
  std::map<int, std::size_t> next;
  std::size_t left = static_cast<std::size_t>(S) * M * 2;
  while (left > 0) {
    bool moved = false;
    for (auto& [rank, list] : cells) {
      for (auto& i = next[rank]; i < list.size(); ++i) {
        const auto [backward, c] = list[i];
        double start = clock[rank];
        bool ready = true;
        if (!backward) {
          for (const int p : producers[c.stage]) {
            ready = ready && fwd[p][c.micro] >= 0;
            if (ready) start = std::max(start, fwd[p][c.micro] + carry(p, p, c.stage, c.micro));
          }
        } else {
          for (const int k : consumers[c.stage]) {
            ready = ready && bwd[k][c.micro] >= 0;
            if (ready) start = std::max(start, bwd[k][c.micro] + carry(c.stage, k, c.stage, c.micro));
          }
        }
        if (!ready) break;
        const double part = backward ? 1 - forwardPart(c.stage) : forwardPart(c.stage);
        const double secs = stageSeconds[c.stage] / M * share(c.micro) * part;
        clock[rank] = start + secs;
        t.busySeconds[plan.stages[c.stage].device] += secs;
        (backward ? bwd : fwd)[c.stage][c.micro] = clock[rank];
        --left;
        moved = true;
      }
    }
    // PipelineOrder's orders follow one global order, so some rank can always move.
    if (!moved) throw std::logic_error("step time: the pipeline replay stalled");
  }
  double end = 0;
  for (const auto& [rank, at] : clock) end = std::max(end, at);
  return end;
}
} // namespace

double defaultFlopsPerSecond(const DeviceSpec& device, placement::Precision precision) {
  if (device.isCuda()) return precision == placement::Precision::BF16 ? kCudaBf16FlopsPerSecond : kCudaFp32FlopsPerSecond;
  return kCpuFlopsPerSecond;
}

double flopsPerSecondOf(const DeviceSpec& device, placement::Precision precision) {
  return device.flopsPerSecond > 0 ? device.flopsPerSecond : defaultFlopsPerSecond(device, precision);
}

double linkBytesPerSecond(const std::string& from, const std::string& to, const std::vector<DeviceSpec>& devices) {
  if (placement::processRank(from) != placement::processRank(to)) {
    double link = 0;
    for (const auto& d : devices) {
      const auto name = placement::canonicalDevice(d.name);
      if ((name == from || name == to) && d.rankLinkBytesPerSecond > 0)
        link = link > 0 ? std::min(link, d.rankLinkBytesPerSecond) : d.rankLinkBytesPerSecond;
    }
    return link > 0 ? link : kRankBytesPerSecond;
  }
  const bool a = from.find("cuda") != std::string::npos, b = to.find("cuda") != std::string::npos;
  if (a || b) return kPcieBytesPerSecond;
  return kHostBytesPerSecond;
}

StepTime predictStepTime(const MemoryPlan& plan, const std::vector<DeviceSpec>& devices,
                         const NetworkStructure& network) {
  auto specOf = [&](const std::string& name) {
    for (const auto& d : devices)
      if (placement::canonicalDevice(d.name) == name) return d;
    return DeviceSpec{name};
  };
  auto speed = [&](const std::string& name, placement::Precision p) { return flopsPerSecondOf(specOf(name), p); };
  StepTime t;
  if (!std::equal(network.stages.begin(), network.stages.end(), plan.stages.begin(), plan.stages.end(),
                  [](const auto& n, const auto& p) { return n.name == p.name; }))
    throw InvalidArgument("step time: the plan is not of this network");
  if (const auto owner = pipelineOwners(plan); !owner.empty()) {
    std::vector<double> seconds;
    for (const auto& s : plan.stages) seconds.push_back(s.flops / speed(s.device, s.precision));
    t.seconds = replayPipeline(plan, network, owner, seconds, devices, t);
    for (const auto& [device, busy] : t.busySeconds) t.computeSeconds = std::max(t.computeSeconds, busy);
    double slowest = 0;
    for (const auto& a : plan.devices)
      for (const auto& b : plan.devices) {
        const double l = linkBytesPerSecond(a.name, b.name, devices);
        if (placement::processRank(a.name) != placement::processRank(b.name)) slowest = slowest > 0 ? std::min(slowest, l) : l;
      }
    t.transferSeconds = static_cast<double>(plan.bytesMoved) / (slowest > 0 ? slowest : kRankBytesPerSecond);
    t.pipelinedRanks = static_cast<int>(std::set<int>(owner.begin(), owner.end()).size());
    return t;
  }
  for (const auto& s : plan.stages) {
    // StagePlan::flops of a sharded stage is its first (largest) slab's: the slowest slab sets the pace.
    double slowest = 0;
    for (const auto& d : placement::splitShards(s.device)) {
      const double secs = s.flops / speed(d, s.precision);
      t.busySeconds[d] += secs;
      slowest = std::max(slowest, secs);
    }
    t.computeSeconds += slowest;
  }
  // Transfers: the plan's bytes (forward and backward) over the slowest link the placement uses.
  double link = kHostBytesPerSecond;
  const auto used = [&] {
    std::vector<std::string> out;
    for (const auto& d : plan.devices) out.push_back(d.name);
    return out;
  }();
  for (std::size_t i = 0; i < used.size(); ++i)
    for (std::size_t j = i + 1; j < used.size(); ++j) link = std::min(link, linkBytesPerSecond(used[i], used[j], devices));
  t.transferSeconds = static_cast<double>(plan.bytesMoved + plan.haloBytes) / link;
  // Host offload copies each offloaded input out in forward and back in backward over PCIe. The
  // prefetch may overlap part of it with compute; counted in full, so an upper bound.
  t.transferSeconds += 2.0 * static_cast<double>(plan.offloadBytes) / kPcieBytesPerSecond;
  t.seconds = t.computeSeconds + t.transferSeconds;
  return t;
}

} // namespace splitseg::planner
