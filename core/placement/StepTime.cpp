#include "core/placement/StepTime.h"

#include <algorithm>

namespace splitseg::placement {

namespace {
// Measured, not datasheet figures (the planner's FLOPs of the seed U-Net's step divided by the
// median step time measured for it):
//  - CUDA: the GPU kit's runs on an H200, seed network at 256^3, batch 1 (docs/bench/gpu.json,
//    2026-11-30): fp32 0.469 s, bf16 0.304 s for kSeed256StepFlops.
//  - CPU: this project's 2-core CI machine, the CPU benchmark's training step (docs/bench/results.jsonl
//    train_splitseg: base 16, 64^3, 2 threads, median 0.732 s) for the planner's 89.5 GFLOP. CPUs
//    differ widely: `plan --measure-speed` measures the CPU it runs on (engine/DeviceSpeed).
constexpr double kSeed256StepFlops = 22.83e12;  // `splitseg-cli plan --patch 256` (seed network), summed stage FLOPs
constexpr double kCudaFp32FlopsPerSecond = kSeed256StepFlops / 0.469;
constexpr double kCudaBf16FlopsPerSecond = kSeed256StepFlops / 0.304;
constexpr double kCpuFlopsPerSecond = 89.5e9 / 0.732;
// Links: PCIe 4.0 x16 moves ~25 GB/s in practice; GPU peer copies over NVLink are faster but not
// every machine has NVLink, so the PCIe figure is used for them too; ranks on one host exchange
// through Gloo over loopback TCP (~2 GB/s measured by the ranks benchmark's bytes and wait times).
constexpr double kPcieBytesPerSecond = 25e9;
constexpr double kRankBytesPerSecond = 2e9;
constexpr double kHostBytesPerSecond = 10e9;
} // namespace

double defaultFlopsPerSecond(const DeviceSpec& device, Precision precision) {
  if (device.isCuda()) return precision == Precision::BF16 ? kCudaBf16FlopsPerSecond : kCudaFp32FlopsPerSecond;
  return kCpuFlopsPerSecond;
}

double flopsPerSecondOf(const DeviceSpec& device, Precision precision) {
  return device.flopsPerSecond > 0 ? device.flopsPerSecond : defaultFlopsPerSecond(device, precision);
}

double linkBytesPerSecond(const std::string& from, const std::string& to) {
  if (splitRank(from).rank != splitRank(to).rank) return kRankBytesPerSecond;
  const bool a = from.find("cuda") != std::string::npos, b = to.find("cuda") != std::string::npos;
  if (a || b) return kPcieBytesPerSecond;
  return kHostBytesPerSecond;
}

StepTime predictStepTime(const MemoryPlan& plan, const std::vector<DeviceSpec>& devices) {
  auto specOf = [&](const std::string& name) {
    for (const auto& d : devices)
      if (canonicalDevice(d.name) == name) return d;
    return DeviceSpec{name};
  };
  auto speed = [&](const std::string& name, Precision p) { return flopsPerSecondOf(specOf(name), p); };
  StepTime t;
  for (const auto& s : plan.stages) {
    // StagePlan::flops of a sharded stage is its first (largest) slab's: the slowest slab sets the pace.
    double slowest = 0;
    for (const auto& d : splitShards(s.device)) {
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
    for (std::size_t j = i + 1; j < used.size(); ++j) link = std::min(link, linkBytesPerSecond(used[i], used[j]));
  t.transferSeconds = static_cast<double>(plan.bytesMoved + plan.haloBytes) / link;
  // Host offload copies each offloaded input out in forward and back in backward over PCIe. The
  // prefetch may overlap part of it with compute; counted in full, so an upper bound.
  t.transferSeconds += 2.0 * static_cast<double>(plan.offloadBytes) / kPcieBytesPerSecond;
  t.seconds = t.computeSeconds + t.transferSeconds;
  return t;
}

} // namespace splitseg::placement
