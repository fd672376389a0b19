#pragma once
// A SampleSource over a Dataset: reads each case through ITK, checks it (geometry match,
// finite voxels, label values declared), applies the Preprocessing, keeps it in a
// memory-bounded cache, and serves random patches (foreground oversampling, padding) with
// seeded augmentation. The Trainer consumes it like the phantom source.
#include "core/data/Augment.h"
#include "core/data/BoundedCache.h"
#include "core/data/PatchSampler.h"
#include "core/data/SampleSource.h"
#include "core/dataset/Dataset.h"
#include "core/volume/Preprocessing.h"

#include <memory>

namespace splitseg::dataset {

struct DatasetSourceOptions {
  Preprocessing preprocessing;
  double validationFraction = 0.2;
  std::uint64_t splitSeed = 0;
  std::size_t cacheBytes = std::size_t(2) << 30;  // preprocessed cases kept in memory
  data::PatchSamplerOptions sampler;
  data::AugmentOptions augment;
  int validationPatchesPerCase = 2;
  bool checkGeometryUpfront = true;  // read every header at construction (fails early)
};

struct PreparedCase {
  data::Sample whole;              // preprocessed channels + label on the network grid
  data::ForegroundIndex foreground;
  std::size_t bytes() const;
};

class DatasetSource final : public data::SampleSource {
public:
  DatasetSource(Dataset dataset, DatasetSourceOptions options);

  data::Sample next(const std::array<std::int64_t, 3>& patchSize, std::mt19937_64& rng) override;
  std::vector<data::Sample> validation(const std::array<std::int64_t, 3>& patchSize) override;
  int channelCount() const override { return dataset_.channelCount(); }
  int foregroundClasses() const override { return dataset_.foregroundClasses(); }
  std::string describe() const override;

  // The preprocessed case (loaded or from the cache). Throws FormatError for bad content.
  std::shared_ptr<const PreparedCase> prepared(std::size_t caseIndex);

  const Dataset& dataset() const { return dataset_; }
  const Split& split() const { return split_; }
  const DatasetSourceOptions& options() const { return options_; }
  // For TrainerOptions::preprocessingJson.
  std::string preprocessingJson() const { return options_.preprocessing.toJson(); }
  std::size_t cachedBytes() const { return cache_.bytes(); }

private:
  PreparedCase load(std::size_t caseIndex) const;

  Dataset dataset_;
  DatasetSourceOptions options_;
  Split split_;
  data::PatchSampler sampler_;
  data::BoundedCache<std::size_t, PreparedCase> cache_;
};

} // namespace splitseg::dataset
