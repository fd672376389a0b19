#include "core/data/CaseSource.h"
#include "core/base/Error.h"

#include <algorithm>
#include <cmath>

namespace splitseg::data {

CaseSource::CaseSource(const Volume& image, const Volume& label, const Preprocessing& preprocessing, bool binary,
                       PatchSamplerOptions sampler)
{
  const std::string diff = image.geometry().differenceTo(label.geometry());
  if (!diff.empty()) throw InvalidArgument("label does not match the image: " + diff);
  whole_.channels.push_back(preprocessing.applyToImage(image));
  whole_.label = preprocessing.applyToLabel(label);
  int maxLabel = 1;
  for (auto& v : whole_.label.voxels()) {
    if (binary) v = v > 0.5f ? 1.0f : 0.0f;
    else maxLabel = std::max(maxLabel, static_cast<int>(std::lround(v)));
  }
  classes_ = binary ? 1 : maxLabel;
  // Outside the volume is background: the lowest intensity after preprocessing (air in CT).
  const auto& voxels = whole_.channels.front().voxels();
  if (!voxels.empty()) sampler.imagePad = *std::min_element(voxels.begin(), voxels.end());
  sampler_ = PatchSampler(sampler);
  foreground_ = sampler_.indexForeground(whole_.label, classes_);
}

Sample CaseSource::next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) {
  return sampler_.sample(whole_, foreground_, patchSize, rng);
}

std::vector<Sample> CaseSource::validation(const std::array<std::int64_t, 3>& patchSize) {
  std::mt19937_64 rng(0x5EED0000ULL);
  return {sampler_.sample(whole_, foreground_, patchSize, rng)};
}

std::string CaseSource::describe() const {
  const auto& s = whole_.label.size();
  return "open volume " + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

} // namespace splitseg::data
