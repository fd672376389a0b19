#pragma once
// Training patches from the open volume and its label: z-score normalised intensities,
// random patches of which half are centred on a foreground voxel (so small structures are
// seen), padded with the background where the patch leaves the volume. Std only.
#include "core/data/SampleSource.h"

#include <memory>

namespace splitseg::ui {

class VolumeSampleSource final : public data::SampleSource {
public:
  // binary: every label > 0 becomes 1 (a one-channel network).
  VolumeSampleSource(std::shared_ptr<const Volume> image, std::shared_ptr<const Volume> label, bool binary = false);
  data::Sample next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) override;
  std::vector<data::Sample> validation(const std::array<std::int64_t, 3>& patchSize) override;
  int foregroundClasses() const override { return classes_; }
  std::string describe() const override;

  // The normalisation training used, for inference on the same image.
  static Volume normalise(const Volume& image);

private:
  data::Sample crop(const std::array<std::int64_t, 3>& centre, const std::array<std::int64_t, 3>& size) const;

  Volume image_;
  std::shared_ptr<const Volume> label_;
  std::vector<std::int64_t> foreground_;  // sample of foreground voxel indices
  int classes_ = 1;
  bool binary_ = false;
};

} // namespace splitseg::ui
