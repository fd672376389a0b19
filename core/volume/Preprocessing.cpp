#include "core/volume/Preprocessing.h"
#include "core/base/JsonText.h"

#include "core/base/Error.h"
#include "core/base/JsonNumbers.h"
#include "core/volume/Orientation.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <utility>

namespace splitseg {

namespace {
const char* modeName(IntensityMode m) {
  switch (m) {
    case IntensityMode::Ct: return "ct";
    case IntensityMode::ZScore: return "zscore";
    default: return "none";
  }
}
} // namespace

std::string Preprocessing::toJson() const {
  nlohmann::json j;
  j["version"] = 1;
  j["canonical"] = canonical;
  j["targetSpacing"] = targetSpacing;
  j["intensity"] = {{"mode", modeName(intensity.mode)}, {"preset", intensity.preset}, {"low", intensity.low},
                    {"high", intensity.high}, {"center", intensity.center}, {"scale", intensity.scale},
                    {"nonzeroOnly", intensity.nonzeroOnly}};
  return j.dump();
}

Preprocessing Preprocessing::fromJson(const std::string& text) {
  Preprocessing p;
  if (text.empty()) return p;
  nlohmann::json j;
  try {
    j = parseJson(text, "preprocessing JSON");
  } catch (const JsonRefused& e) {
    throw InvalidArgument(e.what());
  }
  if (!j.is_object()) throw InvalidArgument("preprocessing JSON must be an object");
  try {
    if (j.contains("version")) {
      const auto version = wholeNumberIn(j["version"], INT64_MIN, INT64_MAX);
      if (!version)
        throw InvalidArgument("preprocessing JSON version " + j["version"].dump().substr(0, 40) + " is not a whole number");
      if (*version > 1)
        throw InvalidArgument("preprocessing JSON version " + j["version"].dump() + " is newer than this build understands");
    }
    p.canonical = j.value("canonical", p.canonical);
    if (j.contains("targetSpacing")) {
      const auto s = j["targetSpacing"].get<std::vector<double>>();
      if (s.size() != 3) throw InvalidArgument("preprocessing targetSpacing needs 3 numbers");
      for (int i = 0; i < 3; ++i) {
        if (s[i] < 0) throw InvalidArgument("preprocessing targetSpacing must not be negative");
        // 0 keeps the source spacing; anything else must be a finite size a scanner could have
        // (a tiny spacing asks the resampler for an astronomically large grid).
        if (!std::isfinite(s[i]) || (s[i] > 0 && (s[i] < 1e-3 || s[i] > 1e4)))
          throw InvalidArgument("preprocessing targetSpacing " + std::to_string(s[i]) +
                                " mm is not 0 (source spacing) or a finite spacing in 0.001..10000 mm");
        p.targetSpacing[i] = s[i];
      }
    }
    if (j.contains("intensity")) {
      const auto& in = j["intensity"];
      const std::string mode = in.value("mode", "none");
      if (mode == "ct") p.intensity.mode = IntensityMode::Ct;
      else if (mode == "zscore") p.intensity.mode = IntensityMode::ZScore;
      else if (mode == "none") p.intensity.mode = IntensityMode::None;
      else throw InvalidArgument("preprocessing intensity mode '" + mode + "' is unknown (ct, zscore, none)");
      p.intensity.preset = in.value("preset", std::string());
      p.intensity.low = in.value("low", p.intensity.low);
      p.intensity.high = in.value("high", p.intensity.high);
      p.intensity.center = in.value("center", p.intensity.center);
      p.intensity.scale = in.value("scale", p.intensity.scale);
      p.intensity.nonzeroOnly = in.value("nonzeroOnly", false);
      for (double v : {p.intensity.low, p.intensity.high, p.intensity.center, p.intensity.scale})
        if (!std::isfinite(v)) throw InvalidArgument("preprocessing intensity values must be finite numbers");
      if (p.intensity.mode == IntensityMode::Ct && (!(p.intensity.high > p.intensity.low) || !(p.intensity.scale > 0)))
        throw InvalidArgument("preprocessing CT window needs high > low and scale > 0");
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("preprocessing JSON has a field of the wrong type: ") + e.what());
  }
  return p;
}

Geometry Preprocessing::networkGrid(const Geometry& source) const {
  Geometry g = canonical ? canonicalGeometry(source) : source;
  std::array<double, 3> sp = g.spacing;
  bool change = false;
  for (int i = 0; i < 3; ++i)
    if (targetSpacing[i] > 0 && std::fabs(targetSpacing[i] - sp[i]) > 1e-6 * sp[i]) {
      sp[i] = targetSpacing[i];
      change = true;
    }
  return change ? gridWithSpacing(g, sp) : g;
}

namespace {
Volume toGrid(const Preprocessing& p, const Volume& v, Interpolation interp) {
  Volume c = p.canonical ? toCanonical(v) : v;
  const Geometry grid = p.networkGrid(v.geometry());
  if (grid.size == c.size() && grid.sameGrid(c.geometry(), 1e-6)) return c;
  return resample(c, grid, interp);
}
} // namespace

Volume Preprocessing::applyToImage(const Volume& image) const {
  Volume v = toGrid(*this, image, Interpolation::Linear);
  normalizeIntensity(v, intensity);
  return v;
}

Volume Preprocessing::applyToLabel(const Volume& label) const { return toGrid(*this, label, Interpolation::Nearest); }

Volume Preprocessing::restore(Volume v, const Geometry& source, Interpolation interp) const {
  const Geometry grid = networkGrid(source);
  if (v.size() != grid.size)
    throw InvalidArgument("prediction grid does not match the network grid of the source image (" +
                          grid.differenceTo(v.geometry()) + ")");
  const Geometry canon = canonical ? canonicalGeometry(source) : source;
  Volume placed = std::move(v);
  placed.geometry() = grid;  // callers (the engine) may hand back bare voxels
  Volume onCanon = canon.sameGrid(grid, 1e-6) ? std::move(placed) : resample(placed, canon, interp);
  Volume out = canonical ? fromCanonical(onCanon, source) : std::move(onCanon);
  out.geometry() = source;
  return out;
}

} // namespace splitseg
