#pragma once
// Training samples from one case held in memory (the volume and label open in the workstation):
// preprocessed once with the run's Preprocessing — the same as dataset training and inference —
// then drawn by the PatchSampler (a third of the draws centred on foreground, as nnU-Net).
// Validation is fixed patches drawn with a fixed seed, so the curve is comparable over a run.
#include "core/data/PatchSampler.h"
#include "core/data/SampleSource.h"
#include "core/volume/Preprocessing.h"

namespace splitseg::data {

class CaseSource final : public SampleSource {
public:
  // binary: every label > 0 becomes 1 (a one-channel network). Throws InvalidArgument when the
  // label's grid differs from the image's.
  CaseSource(const Volume& image, const Volume& label, const Preprocessing& preprocessing, bool binary,
             PatchSamplerOptions sampler = {});
  Sample next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) override;
  std::vector<Sample> validation(const std::array<std::int64_t, 3>& patchSize) override;
  int foregroundClasses() const override { return classes_; }
  std::string describe() const override;

private:
  Sample whole_;
  PatchSampler sampler_;
  ForegroundIndex foreground_;
  int classes_ = 1;
};

} // namespace splitseg::data
