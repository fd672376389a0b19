#include "core/data/PatchSampler.h"

#include "core/base/Error.h"

#include <algorithm>
#include <cmath>

namespace splitseg::data {

bool ForegroundIndex::empty() const {
  return std::all_of(perClass.begin(), perClass.end(), [](const auto& v) { return v.empty(); });
}

PatchSampler::PatchSampler(PatchSamplerOptions options) : options_(options) {
  if (!(options_.foregroundFraction >= 0 && options_.foregroundFraction <= 1))
    throw InvalidArgument("foreground fraction must be within 0..1");
}

ForegroundIndex PatchSampler::indexForeground(const Volume& label, int classes, std::uint64_t seed) const {
  ForegroundIndex fg;
  fg.perClass.resize(static_cast<std::size_t>(std::max(classes, 0)));
  const auto& vox = label.voxels();
  for (std::size_t i = 0; i < vox.size(); ++i) {
    const int c = static_cast<int>(std::lround(vox[i]));
    if (c >= 1 && c <= classes) fg.perClass[static_cast<std::size_t>(c - 1)].push_back(static_cast<std::int64_t>(i));
  }
  std::mt19937_64 rng(seed);
  for (auto& list : fg.perClass)
    if (list.size() > options_.maxForegroundVoxels) {
      // Partial Fisher-Yates: a uniform subsample without a second buffer.
      for (std::size_t i = 0; i < options_.maxForegroundVoxels; ++i) {
        std::uniform_int_distribution<std::size_t> d(i, list.size() - 1);
        std::swap(list[i], list[d(rng)]);
      }
      list.resize(options_.maxForegroundVoxels);
      list.shrink_to_fit();
    }
  return fg;
}

std::array<std::int64_t, 3> PatchSampler::chooseCorner(const std::array<std::int64_t, 3>& size,
                                                       const std::array<std::int64_t, 3>& patch,
                                                       const ForegroundIndex& fg, std::mt19937_64& rng,
                                                       bool* forced) const {
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const bool wantFg = uni(rng) < options_.foregroundFraction;
  std::array<std::int64_t, 3> corner{};
  if (wantFg && !fg.empty()) {
    std::vector<std::size_t> present;
    for (std::size_t c = 0; c < fg.perClass.size(); ++c)
      if (!fg.perClass[c].empty()) present.push_back(c);
    const auto& list = fg.perClass[present[std::uniform_int_distribution<std::size_t>(0, present.size() - 1)(rng)]];
    const std::int64_t idx = list[std::uniform_int_distribution<std::size_t>(0, list.size() - 1)(rng)];
    const std::int64_t v[3] = {idx % size[0], (idx / size[0]) % size[1], idx / (size[0] * size[1])};
    for (int i = 0; i < 3; ++i) {
      // Along an axis shorter than the patch the whole case stays inside (every such
      // corner contains v); otherwise the patch stays inside the case.
      const bool fits = size[i] >= patch[i];
      const std::int64_t lo = fits ? std::max<std::int64_t>(v[i] - patch[i] + 1, 0) : size[i] - patch[i];
      const std::int64_t hi = fits ? std::min(v[i], size[i] - patch[i]) : 0;
      corner[i] = std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    }
    if (forced) *forced = true;
    return corner;
  }
  for (int i = 0; i < 3; ++i) {
    // Smaller cases land at a random place inside the padded patch.
    const std::int64_t a = std::min<std::int64_t>(0, size[i] - patch[i]), b = std::max<std::int64_t>(0, size[i] - patch[i]);
    corner[i] = std::uniform_int_distribution<std::int64_t>(a, b)(rng);
  }
  if (forced) *forced = false;
  return corner;
}

Sample PatchSampler::crop(const Sample& whole, const std::array<std::int64_t, 3>& corner,
                          const std::array<std::int64_t, 3>& patch, float imagePad) {
  auto cut = [&](const Volume& v, float pad) {
    Geometry g = v.geometry();
    g.size = patch;
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 3; ++j)
        g.origin[r] += v.geometry().direction[r * 3 + j] * v.geometry().spacing[j] * static_cast<double>(corner[j]);
    Volume out(g, pad);
    out.setPixelType(v.pixelType());
    const auto& s = v.size();
    for (std::int64_t z = 0; z < patch[2]; ++z) {
      const std::int64_t sz = corner[2] + z;
      if (sz < 0 || sz >= s[2]) continue;
      for (std::int64_t y = 0; y < patch[1]; ++y) {
        const std::int64_t sy = corner[1] + y;
        if (sy < 0 || sy >= s[1]) continue;
        const std::int64_t x0 = std::max<std::int64_t>(0, -corner[0]);
        const std::int64_t x1 = std::min<std::int64_t>(patch[0], s[0] - corner[0]);
        if (x1 <= x0) continue;
        std::copy_n(&v.voxels()[v.index(corner[0] + x0, sy, sz)], x1 - x0, &out.at(x0, y, z));
      }
    }
    return out;
  };
  Sample s;
  for (const auto& c : whole.channels) s.channels.push_back(cut(c, imagePad));
  s.label = cut(whole.label, 0.0f);
  return s;
}

Sample PatchSampler::sample(const Sample& whole, const ForegroundIndex& fg, const std::array<std::int64_t, 3>& patch,
                            std::mt19937_64& rng) const {
  for (int i = 0; i < 3; ++i)
    if (patch[i] <= 0) throw InvalidArgument("patch size must be positive");
  return crop(whole, chooseCorner(whole.label.size(), patch, fg, rng), patch, options_.imagePad);
}

} // namespace splitseg::data
