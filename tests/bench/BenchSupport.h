#pragma once
// Timing helpers shared by the engine-side benchmark commands.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <sstream>
#include <stdexcept>
#include <string>
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

// "N" (a cube) or "X,Y,Z".
inline std::array<std::int64_t, 3> parseSize(const std::string& s) {
  std::array<std::int64_t, 3> out{};
  std::stringstream ss(s);
  std::string item;
  int n = 0;
  while (std::getline(ss, item, ',') && n < 3) out[n++] = std::stoll(item);
  if (n == 1) out[1] = out[2] = out[0];
  else if (n != 3) throw std::invalid_argument("size must be N or X,Y,Z: " + s);
  return out;
}

} // namespace splitseg::bench
