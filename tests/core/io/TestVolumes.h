#pragma once
// Small volumes with anisotropic spacing and an oblique direction for IO tests.
#include "core/volume/Volume.h"

#include <cmath>
#include <random>

namespace splitseg::test {

// Rotation by angles about z then x (det +1), columns are the axes.
inline std::array<double, 9> obliqueDirection(double az = 0.3, double ax = 0.2) {
  const double cz = std::cos(az), sz = std::sin(az), cx = std::cos(ax), sx = std::sin(ax);
  // R = Rx * Rz
  return {cz, -sz, 0.0, cx * sz, cx * cz, -sx, sx * sz, sx * cz, cx};
}

inline Volume makeTestVolume(std::array<std::int64_t, 3> size = {7, 6, 5}, unsigned seed = 1, bool integer = true) {
  Geometry g;
  g.size = size;
  g.spacing = {0.7, 1.3, 2.9};
  g.origin = {-10.5, 3.25, 7.0};
  g.direction = obliqueDirection();
  Volume v(g);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-1024, 3000);
  std::uniform_real_distribution<float> f(-5.0f, 5.0f);
  for (float& x : v.voxels()) x = integer ? static_cast<float>(d(rng)) : f(rng);
  v.setPixelType(integer ? "int16" : "float32");
  return v;
}

} // namespace splitseg::test
