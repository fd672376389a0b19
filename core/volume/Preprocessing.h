#pragma once
// The preprocessing a model was trained with: canonical orientation, target spacing and
// intensity normalisation. It serialises to JSON (stored in checkpoints as
// TrainerOptions::preprocessingJson) so inference prepares images exactly like training,
// and maps predictions back onto the source image's grid.
#include "core/volume/Intensity.h"
#include "core/volume/Resample.h"
#include "core/volume/Volume.h"

#include <array>
#include <string>

namespace splitseg {

class JsonField;
enum class UnknownKeys;

struct Preprocessing {
  bool canonical = true;                         // reorient to LPS axis order first
  std::array<double, 3> targetSpacing{0, 0, 0};  // mm; 0 on an axis keeps the source spacing
  IntensityOptions intensity;

  // {"version":1,"canonical":true,"targetSpacing":[..],"intensity":{"mode":"ct",...}}
  std::string toJson() const;
  // "{}" or "" gives the defaults. Throws InvalidArgument naming the bad field
  // ("preprocessing.targetSpacing[1]: ..."); keys it does not know are ignored (old checkpoints).
  static Preprocessing fromJson(const std::string& json);
  // The same from a field of a larger file (a run's "preprocessing"), its refusals named by the
  // field's path; a run refuses unknown keys, a checkpoint's metadata ignores them.
  static Preprocessing fromJson(const JsonField& field, UnknownKeys unknown);

  // The grid the network sees for an image on `source`.
  Geometry networkGrid(const Geometry& source) const;
  // Image: reorient, linear resample, normalise. Label: reorient, nearest resample.
  Volume applyToImage(const Volume& image) const;
  Volume applyToLabel(const Volume& label) const;
  // A volume on networkGrid(source) back onto source: nearest for labels, linear for
  // probabilities or other continuous maps.
  Volume restore(Volume onNetworkGrid, const Geometry& source, Interpolation interpolation) const;  // moved through where it can
};

} // namespace splitseg
