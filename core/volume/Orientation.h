#pragma once
// Axis order and sense. The network sees every image in one canonical orientation (axes
// along L, P, S as ITK's identity direction) so a model trained on one scanner's
// orientation applies to another's; predictions go back to the source orientation.
// Only permutations and flips are used: voxels are never interpolated here.
#include "core/volume/Volume.h"

#include <array>
#include <string>

namespace splitseg {

// Canonical axis k holds source axis sourceAxis[k], reversed when flip[k].
struct AxisMapping {
  std::array<int, 3> sourceAxis{0, 1, 2};
  std::array<bool, 3> flip{false, false, false};
  bool identity() const { return sourceAxis == std::array<int, 3>{0, 1, 2} && !flip[0] && !flip[1] && !flip[2]; }
};

// Where each voxel axis points in patient space (LPS letters), e.g. "LPS" for ITK's
// identity, "RAS" for a NIfTI identity affine.
std::string orientationCode(const Geometry& geometry);
// True when some axis is not within tolerance (cosine) of a patient axis.
bool isOblique(const Geometry& geometry, double tolerance = 1e-3);

AxisMapping canonicalMapping(const Geometry& geometry);
// Permutes/flips voxels and updates the geometry so every voxel keeps its physical position.
Volume reorient(const Volume& volume, const AxisMapping& mapping);
Volume toCanonical(const Volume& volume);
// Inverse of toCanonical for a volume on toCanonical(source)'s grid: back onto source's grid.
Volume fromCanonical(const Volume& canonical, const Geometry& source);
// The grid toCanonical would produce, without voxels.
Geometry canonicalGeometry(const Geometry& source);

} // namespace splitseg
