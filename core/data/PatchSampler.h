#pragma once
// Random training patches from a whole case. A fraction of draws (default 1/3, as nnU-Net)
// is forced to contain foreground by centring the patch on a random foreground voxel of a
// random class; the rest are uniform. Patches may extend past the borders (always when the
// case is smaller than the patch): images are padded with imagePad, labels with 0.
#include "core/data/SampleSource.h"

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace splitseg::data {

struct PatchSamplerOptions {
  double foregroundFraction = 1.0 / 3.0;
  float imagePad = 0.0f;                // value of image voxels outside the case
  std::size_t maxForegroundVoxels = 100000;  // per class; a seeded subsample keeps memory small
};

// Linear voxel indices of each foreground class (index 0 = class 1).
struct ForegroundIndex {
  std::vector<std::vector<std::int64_t>> perClass;
  bool empty() const;
};

class PatchSampler {
public:
  explicit PatchSampler(PatchSamplerOptions options = {});

  ForegroundIndex indexForeground(const Volume& label, int classes, std::uint64_t seed = 0) const;

  // The corner (x, y, z) of the next patch; may be negative or reach past the end.
  // forcedForeground reports whether this draw was a foreground draw.
  std::array<std::int64_t, 3> chooseCorner(const std::array<std::int64_t, 3>& caseSize,
                                           const std::array<std::int64_t, 3>& patch, const ForegroundIndex& fg,
                                           std::mt19937_64& rng, bool* forcedForeground = nullptr) const;

  Sample sample(const Sample& whole, const ForegroundIndex& fg, const std::array<std::int64_t, 3>& patch,
                std::mt19937_64& rng) const;

  // Copies the box at corner (padding outside) out of every channel and the label.
  static Sample crop(const Sample& whole, const std::array<std::int64_t, 3>& corner,
                     const std::array<std::int64_t, 3>& patch, float imagePad);

  const PatchSamplerOptions& options() const { return options_; }

private:
  PatchSamplerOptions options_;
};

} // namespace splitseg::data
