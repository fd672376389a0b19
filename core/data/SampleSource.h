#pragma once
// Where training samples come from: synthetic phantoms, a dataset's patch sampler, ...
// Std-only so the engine can consume it without knowing about files.
#include "core/volume/Volume.h"

#include <cstdint>
#include <random>
#include <vector>

namespace splitseg::data {

struct Sample {
  std::vector<Volume> channels;  // one volume per input channel, all the same grid
  Volume label;                  // 0 background, 1..N classes
};

class SampleSource {
public:
  virtual ~SampleSource() = default;
  // One training sample (typically a patch) of the given spatial size (x, y, z).
  virtual Sample next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) = 0;
  // Validation samples (whole cases or fixed patches); empty when there is no validation set.
  virtual std::vector<Sample> validation(const std::array<std::int64_t, 3>& patchSize) { (void)patchSize; return {}; }
  virtual int channelCount() const { return 1; }
  virtual int foregroundClasses() const { return 1; }
  virtual std::string describe() const = 0;
};

// Fresh phantoms, one per draw (seeded by the caller's generator).
class PhantomSource final : public SampleSource {
public:
  explicit PhantomSource(int foregroundClasses = 1, double noise = 0.15)
      : classes_(foregroundClasses), noise_(noise) {}
  Sample next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) override;
  std::vector<Sample> validation(const std::array<std::int64_t, 3>& patchSize) override;
  int foregroundClasses() const override { return classes_; }
  std::string describe() const override { return "synthetic phantoms"; }

private:
  int classes_;
  double noise_;
};

} // namespace splitseg::data
