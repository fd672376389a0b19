#include "core/metrics/SegmentationMetrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace splitseg::metrics {

double dice(std::int64_t overlap, std::int64_t predicted, std::int64_t truth) {
  // Both empty: nothing to find and nothing found, a perfect answer (as MONAI with ignore_empty off).
  return predicted + truth == 0 ? 1.0 : 2.0 * double(overlap) / double(predicted + truth);
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

int labelOf(float v) { return static_cast<int>(std::lround(v)); }

// Felzenszwalb & Huttenlocher 1D squared distance transform along one line, spacing s.
void edt1d(const double* f, double* d, std::int64_t n, double s, std::vector<std::int64_t>& v, std::vector<double>& z) {
  v.assign(static_cast<std::size_t>(n), 0);
  z.assign(static_cast<std::size_t>(n + 1), 0);
  std::int64_t k = -1;
  for (std::int64_t q = 0; q < n; ++q) {
    if (f[q] == kInf) continue;
    while (k >= 0) {
      const double pq = double(q) * s, pv = double(v[k]) * s;
      const double sep = ((f[q] + pq * pq) - (f[v[k]] + pv * pv)) / (2 * (pq - pv));
      if (sep <= z[k]) --k;
      else break;
    }
    ++k;
    v[k] = q;
    if (k == 0) z[0] = -kInf;
    else {
      const double pq = double(q) * s, pv = double(v[k - 1]) * s;
      z[k] = ((f[q] + pq * pq) - (f[v[k - 1]] + pv * pv)) / (2 * (pq - pv));
    }
    z[k + 1] = kInf;
  }
  if (k < 0) {
    std::fill(d, d + n, kInf);
    return;
  }
  std::int64_t j = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    while (z[j + 1] < double(q) * s) ++j;
    const double diff = double(q - v[j]) * s;
    d[q] = diff * diff + f[v[j]];
  }
}

std::vector<unsigned char> surface(const Volume& vol, int label) {
  const auto& n = vol.size();
  std::vector<unsigned char> out(static_cast<std::size_t>(vol.voxelCount()), 0);
  for (std::int64_t z = 0; z < n[2]; ++z)
    for (std::int64_t y = 0; y < n[1]; ++y)
      for (std::int64_t x = 0; x < n[0]; ++x) {
        if (labelOf(vol.at(x, y, z)) != label) continue;
        // A voxel of the label with a 6-neighbour outside it (or at the border) is on the surface.
        const bool border = x == 0 || y == 0 || z == 0 || x == n[0] - 1 || y == n[1] - 1 || z == n[2] - 1;
        if (border || labelOf(vol.at(x - 1, y, z)) != label || labelOf(vol.at(x + 1, y, z)) != label ||
            labelOf(vol.at(x, y - 1, z)) != label || labelOf(vol.at(x, y + 1, z)) != label ||
            labelOf(vol.at(x, y, z - 1)) != label || labelOf(vol.at(x, y, z + 1)) != label)
          out[vol.index(x, y, z)] = 1;
      }
  return out;
}

double percentile95(std::vector<double>& d) {
  if (d.empty()) return 0;
  const auto k = static_cast<std::size_t>(std::ceil(0.95 * double(d.size()))) - 1;
  std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k), d.end());
  return d[k];
}
} // namespace

std::vector<double> SegmentationMetrics::squaredDistanceTo(const std::vector<unsigned char>& mask, const Geometry& g) {
  const auto& n = g.size;
  std::vector<double> d(mask.size());
  for (std::size_t i = 0; i < mask.size(); ++i) d[i] = mask[i] ? 0.0 : kInf;
  std::vector<std::int64_t> v;
  std::vector<double> z, in, out;
  const std::int64_t strides[3] = {1, n[0], n[0] * n[1]};
  for (int axis = 0; axis < 3; ++axis) {
    const std::int64_t len = n[axis], stride = strides[axis];
    in.resize(static_cast<std::size_t>(len));
    out.resize(static_cast<std::size_t>(len));
    const std::int64_t lines = g.voxelCount() / len;
    for (std::int64_t l = 0; l < lines; ++l) {
      // Start index of line l along `axis`.
      std::int64_t start;
      if (axis == 0) start = l * n[0];
      else if (axis == 1) start = (l / n[0]) * n[0] * n[1] + (l % n[0]);
      else start = l;
      for (std::int64_t i = 0; i < len; ++i) in[i] = d[static_cast<std::size_t>(start + i * stride)];
      edt1d(in.data(), out.data(), len, g.spacing[axis], v, z);
      for (std::int64_t i = 0; i < len; ++i) d[static_cast<std::size_t>(start + i * stride)] = out[i];
    }
  }
  return d;
}

double SegmentationMetrics::dice(const Volume& p, const Volume& t, int label) {
  std::int64_t a = 0, b = 0, both = 0;
  for (std::size_t i = 0; i < p.voxels().size(); ++i) {
    const bool x = labelOf(p.voxels()[i]) == label, y = labelOf(t.voxels()[i]) == label;
    a += x; b += y; both += x && y;
  }
  return metrics::dice(both, a, b);
}

double SegmentationMetrics::hd95(const Volume& p, const Volume& t, int label) {
  const auto sp = surface(p, label), st = surface(t, label);
  const bool ep = std::none_of(sp.begin(), sp.end(), [](auto c) { return c; });
  const bool et = std::none_of(st.begin(), st.end(), [](auto c) { return c; });
  if (ep && et) return 0;
  if (ep || et) return kInf;
  const auto toT = squaredDistanceTo(st, t.geometry()), toP = squaredDistanceTo(sp, p.geometry());
  std::vector<double> a, b;
  for (std::size_t i = 0; i < sp.size(); ++i) {
    if (sp[i]) a.push_back(std::sqrt(toT[i]));
    if (st[i]) b.push_back(std::sqrt(toP[i]));
  }
  return std::max(percentile95(a), percentile95(b));
}

std::vector<LabelMetrics> SegmentationMetrics::compute(const Volume& p, const Volume& t) {
  int maxLabel = 0;
  for (float v : p.voxels()) maxLabel = std::max(maxLabel, labelOf(v));
  for (float v : t.voxels()) maxLabel = std::max(maxLabel, labelOf(v));
  std::vector<LabelMetrics> out;
  for (int l = 1; l <= maxLabel; ++l) {
    LabelMetrics m;
    m.label = l;
    for (std::size_t i = 0; i < p.voxels().size(); ++i) {
      const bool x = labelOf(p.voxels()[i]) == l, y = labelOf(t.voxels()[i]) == l;
      m.predicted += x; m.truth += y; m.falsePositive += x && !y; m.falseNegative += y && !x;
    }
    m.dice = metrics::dice(m.predicted - m.falsePositive, m.predicted, m.truth);
    m.hd95 = hd95(p, t, l);
    out.push_back(m);
  }
  return out;
}

Volume SegmentationMetrics::errorMap(const Volume& p, const Volume& t) {
  Volume out(p.geometry(), 0.0f);
  for (std::size_t i = 0; i < p.voxels().size(); ++i) {
    const int a = labelOf(p.voxels()[i]), b = labelOf(t.voxels()[i]);
    if (a > 0 && a == b) out.voxels()[i] = 1;
    else if (a > 0) out.voxels()[i] = 2;
    else if (b > 0) out.voxels()[i] = 3;
  }
  return out;
}

std::vector<LabelSummary> summarize(const std::vector<std::vector<LabelMetrics>>& perCase) {
  std::map<int, LabelSummary> by;
  std::map<int, int> finite;
  for (const auto& c : perCase)
    for (const auto& m : c) {
      if (m.predicted == 0 && m.truth == 0) continue;
      auto& s = by[m.label];
      s.label = m.label;
      ++s.cases;
      s.meanDice += m.dice;
      if (std::isfinite(m.hd95)) {
        s.meanHd95 += m.hd95;
        ++finite[m.label];
      } else {
        ++s.infiniteHd95;
      }
    }
  std::vector<LabelSummary> out;
  for (auto& [label, s] : by) {
    s.meanDice /= s.cases;
    s.meanHd95 = finite[label] > 0 ? s.meanHd95 / finite[label] : std::numeric_limits<double>::infinity();
    out.push_back(s);
  }
  return out;
}

} // namespace splitseg::metrics
