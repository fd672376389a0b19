#include "ui/training/VolumeSampleSource.h"

#include <algorithm>
#include <cmath>

namespace splitseg::ui {

VolumeSampleSource::VolumeSampleSource(std::shared_ptr<const Volume> image, std::shared_ptr<const Volume> label, bool binary)
    : image_(normalise(*image)), label_(std::move(label)), binary_(binary) {
  const auto& v = label_->voxels();
  int maxLabel = 1;
  // Every k-th foreground voxel: enough to centre patches, small enough for big volumes.
  std::int64_t count = 0;
  for (float x : v) count += x > 0.5f;
  const std::int64_t stride = std::max<std::int64_t>(1, count / 200000);
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] > 0.5f) {
      maxLabel = std::max(maxLabel, static_cast<int>(std::lround(v[i])));
      if (seen++ % stride == 0) foreground_.push_back(static_cast<std::int64_t>(i));
    }
  }
  classes_ = binary_ ? 1 : maxLabel;
}

Volume VolumeSampleSource::normalise(const Volume& image) {
  Volume out = image;
  double sum = 0, sq = 0;
  for (float x : image.voxels()) { sum += x; sq += double(x) * x; }
  const double n = std::max<double>(1, double(image.voxelCount()));
  const double mean = sum / n, sd = std::sqrt(std::max(1e-12, sq / n - mean * mean));
  for (auto& x : out.voxels()) x = static_cast<float>((x - mean) / sd);
  return out;
}

std::string VolumeSampleSource::describe() const {
  const auto& s = image_.size();
  return "open volume " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

data::Sample VolumeSampleSource::crop(const std::array<std::int64_t, 3>& centre,
                                      const std::array<std::int64_t, 3>& size) const {
  Geometry g = image_.geometry();
  std::array<std::int64_t, 3> start{};
  for (int a = 0; a < 3; ++a) {
    start[a] = centre[a] - size[a] / 2;
    g.origin[a] += start[a] * g.spacing[a];  // direction ignored: patches only train
    g.size[a] = size[a];
  }
  data::Sample s;
  const float background = image_.range().first;
  Volume img(g, background), lab(g, 0.0f);
  const auto& src = image_.size();
  for (std::int64_t z = 0; z < size[2]; ++z) {
    const auto sz = start[2] + z;
    if (sz < 0 || sz >= src[2]) continue;
    for (std::int64_t y = 0; y < size[1]; ++y) {
      const auto sy = start[1] + y;
      if (sy < 0 || sy >= src[1]) continue;
      for (std::int64_t x = 0; x < size[0]; ++x) {
        const auto sx = start[0] + x;
        if (sx < 0 || sx >= src[0]) continue;
        img.at(x, y, z) = image_.at(sx, sy, sz);
        const float l = label_->at(sx, sy, sz);
        lab.at(x, y, z) = binary_ ? (l > 0.5f ? 1.0f : 0.0f) : l;
      }
    }
  }
  s.channels.push_back(std::move(img));
  s.label = std::move(lab);
  return s;
}

data::Sample VolumeSampleSource::next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) {
  const auto& src = image_.size();
  std::array<std::int64_t, 3> centre{};
  if (!foreground_.empty() && std::uniform_int_distribution<int>(0, 1)(rng) == 1) {
    const auto i = foreground_[std::uniform_int_distribution<std::size_t>(0, foreground_.size() - 1)(rng)];
    centre = {i % src[0], (i / src[0]) % src[1], i / (src[0] * src[1])};
  } else {
    for (int a = 0; a < 3; ++a) {
      // Keep the patch inside where the volume allows it.
      const auto lo = std::min(patchSize[a] / 2, src[a] / 2);
      const auto hi = std::max(lo, src[a] - (patchSize[a] - patchSize[a] / 2));
      centre[a] = std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    }
  }
  return crop(centre, patchSize);
}

std::vector<data::Sample> VolumeSampleSource::validation(const std::array<std::int64_t, 3>& patchSize) {
  // A fixed patch at the centre of the foreground: the same every time, so the curve is comparable.
  const auto& src = image_.size();
  std::array<std::int64_t, 3> centre{src[0] / 2, src[1] / 2, src[2] / 2};
  if (!foreground_.empty()) {
    const auto i = foreground_[foreground_.size() / 2];
    centre = {i % src[0], (i / src[0]) % src[1], i / (src[0] * src[1])};
  }
  return {crop(centre, patchSize)};
}

} // namespace splitseg::ui
