#include "core/data/Augment.h"

#include <algorithm>

namespace splitseg::data {

void flipAxis(Volume& v, int axis) {
  const auto s = v.size();
  for (std::int64_t z = 0; z < (axis == 2 ? s[2] / 2 : s[2]); ++z)
    for (std::int64_t y = 0; y < (axis == 1 ? s[1] / 2 : s[1]); ++y) {
      if (axis == 0) {
        float* row = &v.at(0, y, z);
        std::reverse(row, row + s[0]);
        continue;
      }
      for (std::int64_t x = 0; x < s[0]; ++x) {
        if (axis == 1) std::swap(v.at(x, y, z), v.at(x, s[1] - 1 - y, z));
        else std::swap(v.at(x, y, z), v.at(x, y, s[2] - 1 - z));
      }
    }
}

std::array<bool, 3> augment(Sample& s, const AugmentOptions& o, std::mt19937_64& rng) {
  std::array<bool, 3> flipped{false, false, false};
  if (!o.enabled) return flipped;
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int a = 0; a < 3; ++a) {
    flipped[a] = uni(rng) < o.flipProbability[a];
    if (!flipped[a]) continue;
    for (auto& c : s.channels) flipAxis(c, a);
    flipAxis(s.label, a);
  }
  // Draw both numbers always so the stream does not depend on the ranges.
  const double scale = 1.0 + o.scaleRange * (2.0 * uni(rng) - 1.0);
  const double shift = o.shiftRange * (2.0 * uni(rng) - 1.0);
  if (o.scaleRange != 0.0 || o.shiftRange != 0.0)
    for (auto& c : s.channels)
      for (float& x : c.voxels()) x = static_cast<float>(x * scale + shift);
  return flipped;
}

} // namespace splitseg::data
