#include "core/volume/Intensity.h"

#include "core/base/Error.h"

#include <algorithm>
#include <cmath>

namespace splitseg {

namespace {
IntensityOptions window(const std::string& name, double width, double level) {
  IntensityOptions o;
  o.mode = IntensityMode::Ct;
  o.preset = name;
  o.low = level - width / 2;
  o.high = level + width / 2;
  o.center = level;
  o.scale = width / 2;  // window maps to [-1, 1]
  return o;
}
} // namespace

std::vector<std::string> intensityPresetNames() {
  return {"none", "ct-soft-tissue", "ct-bone", "ct-lung", "ct-brain", "ct-full", "mr-zscore"};
}

IntensityOptions intensityPreset(const std::string& name) {
  if (name == "none" || name.empty()) return {};
  if (name == "ct-soft-tissue") return window(name, 400, 40);
  if (name == "ct-bone") return window(name, 1800, 400);
  if (name == "ct-lung") return window(name, 1500, -600);
  if (name == "ct-brain") return window(name, 80, 40);
  if (name == "ct-full") return window(name, 4095, 1023.5);
  if (name == "mr-zscore") {
    IntensityOptions o;
    o.mode = IntensityMode::ZScore;
    o.preset = name;
    return o;
  }
  std::string names;
  for (const auto& n : intensityPresetNames()) names += (names.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown intensity preset '" + name + "' (known: " + names + ")");
}

void normalizeIntensity(Volume& v, const IntensityOptions& o) {
  auto& vox = v.voxels();
  if (o.mode == IntensityMode::Ct) {
    if (!(o.high > o.low) || !(o.scale > 0)) throw InvalidArgument("CT window needs high > low and scale > 0");
    const float lo = static_cast<float>(o.low), hi = static_cast<float>(o.high);
    const double c = o.center, inv = 1.0 / o.scale;
    for (float& x : vox) x = static_cast<float>((std::clamp(x, lo, hi) - c) * inv);
  } else if (o.mode == IntensityMode::ZScore) {
    double sum = 0, sq = 0;
    std::size_t n = 0;
    for (float x : vox)
      if (!o.nonzeroOnly || x != 0.0f) { sum += x; sq += double(x) * x; ++n; }
    const double mean = n ? sum / double(n) : 0.0;
    const double var = n ? std::max(0.0, sq / double(n) - mean * mean) : 0.0;
    const double sd = std::sqrt(var);
    const double inv = sd > 1e-8 ? 1.0 / sd : 0.0;
    for (float& x : vox)
      if (!o.nonzeroOnly || x != 0.0f) x = static_cast<float>((x - mean) * inv);
  }
  v.setPixelType("float32");
}

} // namespace splitseg
