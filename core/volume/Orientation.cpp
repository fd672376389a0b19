#include "core/volume/Orientation.h"

#include "core/base/Error.h"

#include <cmath>

namespace splitseg {

namespace {
double dir(const Geometry& g, int row, int axis) { return g.direction[row * 3 + axis]; }
} // namespace

std::string orientationCode(const Geometry& g) {
  static const char pos[] = {'L', 'P', 'S'}, neg[] = {'R', 'A', 'I'};
  std::string code;
  for (int a = 0; a < 3; ++a) {
    int best = 0;
    for (int r = 1; r < 3; ++r)
      if (std::fabs(dir(g, r, a)) > std::fabs(dir(g, best, a))) best = r;
    code += dir(g, best, a) >= 0 ? pos[best] : neg[best];
  }
  return code;
}

bool isOblique(const Geometry& g, double tol) {
  for (int a = 0; a < 3; ++a) {
    double m = 0;
    for (int r = 0; r < 3; ++r) m = std::max(m, std::fabs(dir(g, r, a)));
    if (m < 1.0 - tol) return true;
  }
  return false;
}

AxisMapping canonicalMapping(const Geometry& g) {
  // Best of the 6 permutations by the summed |cosine|: robust for oblique scans too.
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  AxisMapping m;
  double best = -1;
  for (const auto& p : perms) {
    double score = 0;
    for (int k = 0; k < 3; ++k) score += std::fabs(dir(g, k, p[k]));  // source axis p[k] along world k
    if (score > best + 1e-9) {
      best = score;
      m.sourceAxis = {p[0], p[1], p[2]};
    }
  }
  for (int k = 0; k < 3; ++k) m.flip[k] = dir(g, k, m.sourceAxis[k]) < 0;
  return m;
}

namespace {
Geometry mappedGeometry(const Geometry& s, const AxisMapping& m) {
  Geometry c;
  std::array<std::int64_t, 3> corner{0, 0, 0};  // source index of canonical voxel (0,0,0)
  for (int k = 0; k < 3; ++k) {
    const int j = m.sourceAxis[k];
    c.size[k] = s.size[j];
    c.spacing[k] = s.spacing[j];
    for (int r = 0; r < 3; ++r) c.direction[r * 3 + k] = (m.flip[k] ? -1.0 : 1.0) * s.direction[r * 3 + j];
    if (m.flip[k]) corner[j] = s.size[j] - 1;
  }
  for (int r = 0; r < 3; ++r) {
    c.origin[r] = s.origin[r];
    for (int j = 0; j < 3; ++j) c.origin[r] += s.direction[r * 3 + j] * s.spacing[j] * static_cast<double>(corner[j]);
  }
  return c;
}
} // namespace

Geometry canonicalGeometry(const Geometry& source) { return mappedGeometry(source, canonicalMapping(source)); }

Volume reorient(const Volume& v, const AxisMapping& m) {
  const Geometry& s = v.geometry();
  Volume out(mappedGeometry(s, m));
  out.setPixelType(v.pixelType());
  const auto& cs = out.size();
  std::array<std::int64_t, 3> src{};
  for (std::int64_t z = 0; z < cs[2]; ++z)
    for (std::int64_t y = 0; y < cs[1]; ++y)
      for (std::int64_t x = 0; x < cs[0]; ++x) {
        const std::int64_t c[3] = {x, y, z};
        for (int k = 0; k < 3; ++k) {
          const int j = m.sourceAxis[k];
          src[j] = m.flip[k] ? s.size[j] - 1 - c[k] : c[k];
        }
        out.at(x, y, z) = v.at(src[0], src[1], src[2]);
      }
  return out;
}

Volume toCanonical(const Volume& v) { return reorient(v, canonicalMapping(v.geometry())); }

Volume fromCanonical(const Volume& canonical, const Geometry& source) {
  const AxisMapping m = canonicalMapping(source);
  const Geometry expect = mappedGeometry(source, m);
  if (canonical.size() != expect.size)
    throw InvalidArgument("fromCanonical: volume size does not match the canonical grid of the source (" +
                          expect.differenceTo(canonical.geometry()) + ")");
  Volume out(source);
  out.setPixelType(canonical.pixelType());
  std::array<std::int64_t, 3> c{};
  for (std::int64_t z = 0; z < source.size[2]; ++z)
    for (std::int64_t y = 0; y < source.size[1]; ++y)
      for (std::int64_t x = 0; x < source.size[0]; ++x) {
        const std::int64_t s[3] = {x, y, z};
        for (int k = 0; k < 3; ++k) {
          const int j = m.sourceAxis[k];
          c[k] = m.flip[k] ? source.size[j] - 1 - s[j] : s[j];
        }
        out.at(x, y, z) = canonical.at(c[0], c[1], c[2]);
      }
  return out;
}

} // namespace splitseg
