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

struct Preprocessing {
  bool canonical = true;                         // reorient to LPS axis order first
  std::array<double, 3> targetSpacing{0, 0, 0};  // mm; 0 on an axis keeps the source spacing
  IntensityOptions intensity;

  // {"version":1,"canonical":true,"targetSpacing":[..],"intensity":{"mode":"ct",...}}
  std::string toJson() const;
  // "{}" or "" gives the defaults. Throws InvalidArgument naming the bad field.
  static Preprocessing fromJson(const std::string& json);

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
