#pragma once
// What a checkpoint says about itself: the run description it was trained with (network,
// placement, precision, preprocessing, ...) and where that run stood. Stored as JSON inside the
// checkpoint file; parsed here without LibTorch, so it can be fuzzed on its own.
#include "core/run/RunSpec.h"

#include <cstdint>
#include <string>

namespace splitseg::run {

// 3: the pickle container (plain tensors, weights_only-readable); 2: the run under "run" in a
// TorchScript archive; 1: loose keys (architecture, options, placement, ...).
constexpr int kCheckpointVersion = 3;

struct CheckpointInfo {
  RunSpec run;
  std::int64_t step = 0;
  std::string sampleRng;  // the sampler's std::mt19937_64 state as text

  // The metadata JSON of a version-kCheckpointVersion file.
  std::string toMetaJson() const;
  // Any version up to kCheckpointVersion; throws FormatError naming path and the bad field.
  static CheckpointInfo fromMetaJson(const std::string& text, const std::string& path);
};

} // namespace splitseg::run
