#include "core/volume/GeometryCheck.h"
#include "core/base/Units.h"

#include "core/base/Error.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace splitseg {

namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

const char* axisName(int i) { return i == 0 ? "x" : i == 1 ? "y" : "z"; }

double det3(const std::array<double, 9>& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
}

} // namespace

std::uint64_t availableMemoryBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  return std::uint64_t{16} << 30;
}

std::uint64_t readMemoryBytes() {
  std::uint64_t bytes = availableMemoryBytes();
  if (const char* v = std::getenv("SPLITSEG_READ_MEMORY")) {
    char* end = nullptr;
    const unsigned long long b = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0' && b > 0) bytes = std::min<std::uint64_t>(bytes, b);
  }
  return bytes;
}

std::int64_t voxelCap(std::size_t bytesPerVoxel) {
  const std::uint64_t perVoxel = bytesPerVoxel ? bytesPerVoxel : 1;
  std::uint64_t cap = std::min<std::uint64_t>(availableMemoryBytes() / perVoxel, std::uint64_t{1} << 34);
  // A lower cap for fuzzing or shared machines; never a higher one.
  if (const char* env = std::getenv("SPLITSEG_MAX_VOXELS")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) cap = std::min<std::uint64_t>(cap, v);
  }
  return static_cast<std::int64_t>(cap);
}

std::string loadCostProblem(std::int64_t voxels, std::size_t bytesPerComponent) {
  const double decoded = static_cast<double>(voxels) * static_cast<double>(bytesPerComponent);
  const double need = decoded + static_cast<double>(voxels) * sizeof(float);
  const double available = static_cast<double>(readMemoryBytes());
  if (need <= available) {
    const std::int64_t cap = voxelCap(bytesPerComponent + sizeof(float));  // 2^34, SPLITSEG_MAX_VOXELS
    if (voxels <= cap) return {};
    return "has " + std::to_string(voxels) + " voxels, more than this machine's limit of " + std::to_string(cap);
  }
  return "decodes to " + formatBytes(decoded) + "; with its float copy this needs " + formatBytes(need) +
         ", more than the available memory (" + formatBytes(available) + ")";
}

bool checkedVoxelCount(const std::array<std::int64_t, 3>& size, std::int64_t& out) {
  std::int64_t n = 1;
  for (const std::int64_t s : size)
    if (s <= 0 || __builtin_mul_overflow(n, s, &n)) return false;
  out = n;
  return true;
}

std::string geometryProblem(const Geometry& g, std::size_t bytesPerVoxel) {
  for (int i = 0; i < 3; ++i)
    if (g.size[i] <= 0) return std::string("size along ") + axisName(i) + " is " + std::to_string(g.size[i]) + " (must be positive)";
  std::int64_t n = 0;
  const std::string dims = std::to_string(g.size[0]) + "x" + std::to_string(g.size[1]) + "x" + std::to_string(g.size[2]);
  if (!checkedVoxelCount(g.size, n)) return "size " + dims + " overflows a 64-bit voxel count";
  const std::int64_t cap = voxelCap(bytesPerVoxel);
  if (n > cap)
    return "size " + dims + " (" + std::to_string(n) + " voxels) exceeds what the available memory allows (" +
           std::to_string(cap) + " voxels)";
  for (int i = 0; i < 3; ++i)
    if (!std::isfinite(g.spacing[i]) || !(g.spacing[i] >= 1e-6) || !(g.spacing[i] <= 1e6))
      return std::string("spacing along ") + axisName(i) + " is " + num(g.spacing[i]) + " (must be finite, 1e-6..1e6 mm)";
  for (int i = 0; i < 3; ++i)
    if (!std::isfinite(g.origin[i]) || std::fabs(g.origin[i]) > 1e9)
      return std::string("origin along ") + axisName(i) + " is " + num(g.origin[i]) + " (must be finite, |x| <= 1e9 mm)";
  for (int i = 0; i < 9; ++i)
    if (!std::isfinite(g.direction[i]) || std::fabs(g.direction[i]) > 1e3)
      return "direction matrix holds " + num(g.direction[i]) + " (must be finite)";
  const double d = det3(g.direction);
  if (!(std::fabs(d) > 1e-6)) return "direction matrix is singular (determinant " + num(d) + ")";
  return {};
}

void checkGeometry(const Geometry& g, const std::string& context, std::size_t bytesPerVoxel) {
  const std::string p = geometryProblem(g, bytesPerVoxel);
  if (!p.empty()) throw InvalidArgument(context + ": " + p);
}

bool toAxisSize(double value, std::int64_t& out) {
  if (!std::isfinite(value) || value < 1 || value >= 2147483648.0 || std::floor(value) != value) return false;
  out = static_cast<std::int64_t>(value);
  return true;
}

} // namespace splitseg
