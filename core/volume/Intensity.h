#pragma once
// Intensity normalisation. CT: clip to a HU window, then (v - center) / scale with fixed
// numbers, so every scan maps the same way. MR: z-score per image (MR has no absolute
// scale). Parameters travel with the model (Preprocessing.h) so inference matches training.
#include "core/volume/Volume.h"

#include <string>
#include <vector>

namespace splitseg {

enum class IntensityMode { None, Ct, ZScore };

struct IntensityOptions {
  IntensityMode mode = IntensityMode::None;
  std::string preset;        // name it came from ("ct-soft-tissue", ...), informative
  double low = -1024, high = 3071;   // Ct: clip window in HU
  double center = 0, scale = 1;      // Ct: (clip(v) - center) / scale
  bool nonzeroOnly = false;          // ZScore: statistics over nonzero voxels (skull-stripped MR)
};

// "ct-soft-tissue" (W400 L40), "ct-bone" (W1800 L400), "ct-lung" (W1500 L-600),
// "ct-brain" (W80 L40), "ct-full" (-1024..3071), "mr-zscore", "none". Throws InvalidArgument.
IntensityOptions intensityPreset(const std::string& name);
std::vector<std::string> intensityPresetNames();

// In place. ZScore of a constant image gives zeros.
void normalizeIntensity(Volume& v, const IntensityOptions& options);

} // namespace splitseg
