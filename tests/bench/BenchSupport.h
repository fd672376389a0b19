#pragma once
// Timing helpers shared by the engine-side benchmark commands.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

namespace splitseg::bench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// Process CPU time (all threads): far less sensitive than wall time to other jobs on a shared
// machine, as long as idle OpenMP threads sleep (run.sh sets OMP_WAIT_POLICY=PASSIVE).
inline double cpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace splitseg::bench
