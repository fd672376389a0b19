#include "core/volume/Preprocessing.h"
#include "core/base/JsonText.h"

#include "core/base/Error.h"
#include "core/base/JsonReader.h"
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
  if (text.empty()) return {};
  nlohmann::json j;
  try {
    j = parseJson(text, "preprocessing JSON");
  } catch (const JsonRefused& e) {
    throw InvalidArgument(e.what());
  }
  return fromJson(JsonField(j, "preprocessing"), UnknownKeys::Ignore);
}

namespace {
// 0 keeps the source spacing; anything else must be a finite size a scanner could have (a tiny
// spacing asks the resampler for an astronomically large grid).
double spacingOf(const JsonField& f) {
  const double mm = f.as<double>();
  if (mm < 0) f.refuse("must not be negative");
  if (!std::isfinite(mm) || (mm > 0 && (mm < 1e-3 || mm > 1e4)))
    f.refuse(std::to_string(mm) + " mm is not 0 (source spacing) or a finite spacing in 0.001..10000 mm");
  return mm;
}

void readIntensity(const JsonField& field, UnknownKeys unknown, IntensityOptions& o) {
  auto in = field.fields(unknown);
  if (const auto m = in.take("mode"))
    o.mode = m->oneOf<IntensityMode>({{"ct", IntensityMode::Ct}, {"zscore", IntensityMode::ZScore}, {"none", IntensityMode::None}});
  in.read("preset", o.preset);
  using Number = std::pair<const char*, double*>;
  for (const auto& [key, value] : {Number{"low", &o.low}, Number{"high", &o.high}, Number{"center", &o.center},
                                   Number{"scale", &o.scale}})
    if (const auto v = in.take(key)) {
      *value = v->as<double>();
      if (!std::isfinite(*value)) v->refuse("must be a finite number");
    }
  in.read("nonzeroOnly", o.nonzeroOnly);
  if (o.mode == IntensityMode::Ct && (!(o.high > o.low) || !(o.scale > 0)))
    field.refuse("a CT window needs high > low and scale > 0");
}
} // namespace

Preprocessing Preprocessing::fromJson(const JsonField& field, UnknownKeys unknown) {
  Preprocessing p;
  auto j = field.fields(unknown);
  if (const auto v = j.take("version"); v && v->as<std::int64_t>() > 1)
    v->refuse(v->shown() + " is newer than this build understands");
  j.read("canonical", p.canonical);
  if (const auto s = j.take("targetSpacing")) {
    const auto axes = s->elements(3, 3, "3 numbers");
    for (std::size_t i = 0; i < 3; ++i) p.targetSpacing[i] = spacingOf(axes[i]);
  }
  if (const auto in = j.take("intensity")) readIntensity(*in, unknown, p.intensity);
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
