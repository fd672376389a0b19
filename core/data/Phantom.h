#pragma once
// Synthetic CT-like phantoms for tests and demos: a few ellipsoids with noise, with the
// exact label of the foreground ellipsoids. Seeded, so every run sees the same volume.
#include "core/volume/Volume.h"

#include <cstdint>

namespace splitseg::data {

struct PhantomOptions {
  std::array<std::int64_t, 3> size{32, 32, 32};
  std::array<double, 3> spacing{1.0, 1.0, 1.0};
  int foregroundClasses = 1;   // labels 1..N, one ellipsoid group per class
  int ellipsoidsPerClass = 2;
  double noise = 0.15;         // std of Gaussian noise, image units (foreground contrast is ~1)
  std::uint64_t seed = 0;
};

struct Phantom {
  Volume image;   // float intensities, background ~0, class c at ~c
  Volume label;   // 0 background, 1..N classes
};

Phantom makePhantom(const PhantomOptions& options);

} // namespace splitseg::data
