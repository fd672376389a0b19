#include "core/volume/Resample.h"

#include "core/base/Error.h"
#include "core/volume/GeometryCheck.h"

#include <algorithm>
#include <cmath>

namespace splitseg {

Geometry gridWithSpacing(const Geometry& g, const std::array<double, 3>& spacing) {
  checkGeometry(g, "resampling source grid");
  Geometry out = g;
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(spacing[i]) || !(spacing[i] > 0))
      throw InvalidArgument("target spacing must be finite and positive (got " + std::to_string(spacing[i]) + ")");
    // In double first: a tiny spacing must be refused, never rounded into a wrapped size.
    const double n = std::max(1.0, std::round(static_cast<double>(g.size[i]) * g.spacing[i] / spacing[i]));
    if (!(n < 2147483648.0))
      throw InvalidArgument("target spacing " + std::to_string(spacing[i]) + " mm gives an absurd grid (" +
                            std::to_string(n) + " voxels along one axis)");
    out.spacing[i] = spacing[i];
    out.size[i] = static_cast<std::int64_t>(n);
  }
  checkGeometry(out, "resampling to target spacing");
  return out;
}

Volume resample(const Volume& v, const Geometry& t, Interpolation interp, float outside) {
  const Geometry& s = v.geometry();
  checkGeometry(s, "resampling source grid");
  checkGeometry(t, "resampling target grid");
  if (static_cast<std::int64_t>(v.voxels().size()) != s.voxelCount())
    throw InvalidArgument("resampling: the volume holds " + std::to_string(v.voxels().size()) +
                          " voxels, its geometry says " + std::to_string(s.voxelCount()));
  // Source continuous index = A * target index + b (directions orthonormal: inverse = transpose).
  double A[3][3], b[3];
  for (int r = 0; r < 3; ++r) {
    double d = 0;
    for (int k = 0; k < 3; ++k) d += s.direction[k * 3 + r] * (t.origin[k] - s.origin[k]);
    b[r] = d / s.spacing[r];
    for (int c = 0; c < 3; ++c) {
      double m = 0;
      for (int k = 0; k < 3; ++k) m += s.direction[k * 3 + r] * t.direction[k * 3 + c];
      A[r][c] = m * t.spacing[c] / s.spacing[r];
    }
  }
  Volume out(t, outside);
  out.setPixelType(v.pixelType());
  const std::int64_t nx = s.size[0], ny = s.size[1], nz = s.size[2];
  const float* src = v.data();
  float* dst = out.data();
  std::size_t o = 0;
  for (std::int64_t z = 0; z < t.size[2]; ++z)
    for (std::int64_t y = 0; y < t.size[1]; ++y)
      for (std::int64_t x = 0; x < t.size[0]; ++x, ++o) {
        double p[3];
        for (int r = 0; r < 3; ++r) p[r] = A[r][0] * x + A[r][1] * y + A[r][2] * z + b[r];
        // Inside means within half a voxel of the source grid (its physical extent); the
        // negated test also sends NaN positions outside.
        if (!(std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2]))) continue;
        if (p[0] < -0.5 || p[1] < -0.5 || p[2] < -0.5 || p[0] > nx - 0.5 || p[1] > ny - 0.5 || p[2] > nz - 0.5) continue;
        if (interp == Interpolation::Nearest) {
          const std::int64_t ix = std::clamp<std::int64_t>(std::llround(p[0]), 0, nx - 1);
          const std::int64_t iy = std::clamp<std::int64_t>(std::llround(p[1]), 0, ny - 1);
          const std::int64_t iz = std::clamp<std::int64_t>(std::llround(p[2]), 0, nz - 1);
          dst[o] = src[(iz * ny + iy) * nx + ix];
          continue;
        }
        std::int64_t i0[3], i1[3];
        double f[3];
        const std::int64_t n[3] = {nx, ny, nz};
        for (int r = 0; r < 3; ++r) {
          const double c = std::clamp(p[r], 0.0, static_cast<double>(n[r] - 1));
          i0[r] = static_cast<std::int64_t>(std::floor(c));
          i1[r] = std::min(i0[r] + 1, n[r] - 1);
          f[r] = c - static_cast<double>(i0[r]);
        }
        auto at = [&](std::int64_t ix, std::int64_t iy, std::int64_t iz) { return static_cast<double>(src[(iz * ny + iy) * nx + ix]); };
        const double c00 = at(i0[0], i0[1], i0[2]) * (1 - f[0]) + at(i1[0], i0[1], i0[2]) * f[0];
        const double c10 = at(i0[0], i1[1], i0[2]) * (1 - f[0]) + at(i1[0], i1[1], i0[2]) * f[0];
        const double c01 = at(i0[0], i0[1], i1[2]) * (1 - f[0]) + at(i1[0], i0[1], i1[2]) * f[0];
        const double c11 = at(i0[0], i1[1], i1[2]) * (1 - f[0]) + at(i1[0], i1[1], i1[2]) * f[0];
        const double c0 = c00 * (1 - f[1]) + c10 * f[1], c1 = c01 * (1 - f[1]) + c11 * f[1];
        dst[o] = static_cast<float>(c0 * (1 - f[2]) + c1 * f[2]);
      }
  return out;
}

} // namespace splitseg
