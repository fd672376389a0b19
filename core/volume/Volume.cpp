#include "core/volume/Volume.h"

#include "core/base/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace splitseg {

std::int64_t Geometry::voxelCount() const {
  std::int64_t n = 1;
  for (const std::int64_t s : size)
    if (s < 0 || __builtin_mul_overflow(n, s, &n))
      throw InvalidArgument("volume size " + std::to_string(size[0]) + "x" + std::to_string(size[1]) + "x" +
                            std::to_string(size[2]) + " is negative or overflows a voxel count");
  return n;
}

bool Geometry::sameGrid(const Geometry& other, double tolerance) const {
  return differenceTo(other, tolerance).empty();
}

std::string Geometry::differenceTo(const Geometry& o, double tol) const {
  std::ostringstream s;
  auto vec = [](const auto& a, std::size_t n) {
    std::ostringstream t;
    for (std::size_t i = 0; i < n; ++i) t << (i ? "x" : "") << a[i];
    return t.str();
  };
  if (size != o.size) s << "size " << vec(size, 3) << " vs " << vec(o.size, 3) << "; ";
  for (int i = 0; i < 3; ++i)
    if (!(std::fabs(spacing[i] - o.spacing[i]) <= tol * std::max(1.0, std::fabs(spacing[i])))) {
      s << "spacing " << vec(spacing, 3) << " vs " << vec(o.spacing, 3) << "; ";
      break;
    }
  for (int i = 0; i < 3; ++i)
    if (!(std::fabs(origin[i] - o.origin[i]) <= tol * std::max(1.0, std::fabs(origin[i])) + 1e-3)) {
      s << "origin " << vec(origin, 3) << " vs " << vec(o.origin, 3) << "; ";
      break;
    }
  for (int i = 0; i < 9; ++i)
    if (!(std::fabs(direction[i] - o.direction[i]) <= tol)) {
      s << "direction differs; ";
      break;
    }
  std::string r = s.str();
  if (!r.empty()) r.resize(r.size() - 2);
  return r;
}

Volume::Volume(const Geometry& geometry, float fill)
    : geometry_(geometry), voxels_(static_cast<std::size_t>(geometry.voxelCount()), fill) {}

Volume::Volume(const Geometry& geometry, std::vector<float>&& voxels) : geometry_(geometry), voxels_(std::move(voxels)) {
  if (static_cast<std::int64_t>(voxels_.size()) != geometry.voxelCount())
    throw InvalidArgument("volume: " + std::to_string(voxels_.size()) + " voxels for a grid of " +
                          std::to_string(geometry.voxelCount()));
}

std::pair<float, float> Volume::range() const {
  if (voxels_.empty()) return {0.0f, 0.0f};
  auto [lo, hi] = std::minmax_element(voxels_.begin(), voxels_.end());
  return {*lo, *hi};
}

} // namespace splitseg
