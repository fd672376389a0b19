#pragma once
// Resampling between grids in physical space: linear for images, nearest for labels (so
// labels stay labels). Directions are assumed orthonormal, as ITK/DICOM ones are.
#include "core/volume/Volume.h"

#include <array>

namespace splitseg {

enum class Interpolation { Nearest, Linear };

// Values of v at the voxel centres of target; points outside v get `outside`.
Volume resample(const Volume& v, const Geometry& target, Interpolation interpolation, float outside = 0.0f);

// Same origin (centre of voxel 0) and direction, spacing replaced, size chosen to cover the
// same extent (rounded, at least 1).
Geometry gridWithSpacing(const Geometry& g, const std::array<double, 3>& spacing);

inline Volume resampleToSpacing(const Volume& v, const std::array<double, 3>& spacing, Interpolation interpolation) {
  return resample(v, gridWithSpacing(v.geometry(), spacing), interpolation);
}

} // namespace splitseg
