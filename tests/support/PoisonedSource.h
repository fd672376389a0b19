#pragma once
// Phantoms with one poisoned draw: a NaN or infinite voxel in the image, or a bad label value, in
// the `poisonAt`-th sample drawn (1-based). Tests of a refused training step use it.
#include "core/data/SampleSource.h"

#include <cmath>
#include <string>

namespace splitseg::testing {

struct PoisonedSource : data::SampleSource {
  data::PhantomSource phantoms;
  int draws = 0, poisonAt = 0;
  float imageValue = 0, labelValue = -1;
  data::Sample next(const std::array<std::int64_t, 3>& size, std::mt19937_64& rng) override {
    auto s = phantoms.next(size, rng);
    if (++draws == poisonAt) {
      if (std::isnan(imageValue) || std::isinf(imageValue)) s.channels[0].at(1, 2, 3) = imageValue;
      if (labelValue >= 0) s.label.at(3, 2, 1) = labelValue;
    }
    return s;
  }
  std::string describe() const override { return "poisoned phantoms"; }
};

} // namespace splitseg::testing
