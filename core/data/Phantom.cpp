#include "core/data/Phantom.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace splitseg::data {

Phantom makePhantom(const PhantomOptions& o) {
  Geometry g;
  g.size = o.size;
  g.spacing = o.spacing;
  Phantom p{Volume(g), Volume(g)};
  p.label.setPixelType("uint8");
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double nx = static_cast<double>(o.size[0]), ny = static_cast<double>(o.size[1]),
               nz = static_cast<double>(o.size[2]);
  for (int c = 1; c <= o.foregroundClasses; ++c) {
    for (int e = 0; e < o.ellipsoidsPerClass; ++e) {
      // Centres well inside; radii 12-25% of the extent so objects are visible at any size.
      const double cx = nx * (0.3 + 0.4 * uni(rng)), cy = ny * (0.3 + 0.4 * uni(rng)),
                   cz = nz * (0.3 + 0.4 * uni(rng));
      const double rx = nx * (0.12 + 0.13 * uni(rng)), ry = ny * (0.12 + 0.13 * uni(rng)),
                   rz = nz * (0.12 + 0.13 * uni(rng));
      for (std::int64_t z = 0; z < o.size[2]; ++z)
        for (std::int64_t y = 0; y < o.size[1]; ++y)
          for (std::int64_t x = 0; x < o.size[0]; ++x) {
            const double dx = (x - cx) / rx, dy = (y - cy) / ry, dz = (z - cz) / rz;
            if (dx * dx + dy * dy + dz * dz <= 1.0) {
              p.label.at(x, y, z) = static_cast<float>(c);
              p.image.at(x, y, z) = static_cast<float>(c);
            }
          }
    }
  }
  std::normal_distribution<float> noise(0.0f, static_cast<float>(o.noise));
  for (float& v : p.image.voxels()) v += noise(rng);
  return p;
}

} // namespace splitseg::data
