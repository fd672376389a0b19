#pragma once
// Seeded augmentation of training patches: flips per axis (image and label together) and a
// random intensity scale and shift (image only). Deterministic for a given generator state.
#include "core/data/SampleSource.h"

#include <array>
#include <random>

namespace splitseg::data {

struct AugmentOptions {
  bool enabled = true;
  std::array<double, 3> flipProbability{0.5, 0.5, 0.5};  // x, y, z
  double scaleRange = 0.1;  // intensity multiplied by U(1 - r, 1 + r)
  double shiftRange = 0.1;  // then U(-r, r) added (normalised units)
};

// Returns which axes were flipped (for tests and logs).
std::array<bool, 3> augment(Sample& sample, const AugmentOptions& options, std::mt19937_64& rng);

// Reverses the voxel order along an axis in place.
void flipAxis(Volume& v, int axis);

} // namespace splitseg::data
