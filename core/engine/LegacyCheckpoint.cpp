#include "core/engine/LegacyCheckpoint.h"
#include "core/base/Error.h"
#include "core/checkpoint/CheckpointFile.h"
#include "core/engine/NetworkFactory.h"

#include <torch/torch.h>

namespace splitseg::engine {

void convertLegacyCheckpoint(const std::string& from, const std::string& to) {
  if (!checkpoint::isLegacyCheckpoint(from)) throw FormatError(from, "not a checkpoint in the old TorchScript format");
  torch::serialize::InputArchive archive, modelArchive, optimArchive;
  c10::IValue metaValue;
  try {
    archive.load_from(from, torch::kCPU);
    if (!archive.try_read("meta", metaValue) || !metaValue.isString())
      throw FormatError(from, "not a SplitSeg checkpoint (no metadata)");
  } catch (const c10::Error& e) {
    throw FormatError(from, std::string("not a readable checkpoint: ") + e.what_without_backtrace());
  }
  auto info = run::CheckpointInfo::fromMetaJson(metaValue.toStringRef(), from);
  auto net = createNetwork(info.run.architecture, info.run.networkOptions.dump());
  torch::optim::Adam adam(net->root().parameters(), torch::optim::AdamOptions(info.run.learningRate));
  try {
    archive.read("model", modelArchive);
    net->root().load(modelArchive);
    if (archive.try_read("optimizer", optimArchive)) adam.load(optimArchive);
  } catch (const c10::Error& e) {
    throw FormatError(from, std::string("cannot read weights: ") + e.what_without_backtrace());
  }
  auto file = checkpoint::CheckpointFile::capture(net->root(), adam, info);
  // The generators it saved, not this process's.
  file.rng.clear();
  torch::Tensor state;
  if (archive.try_read("torch_rng", state)) file.rng["cpu"] = state;
  c10::IValue count;
  if (archive.try_read("torch_cuda_rng_count", count) && count.isInt())
    for (std::int64_t i = 0; i < count.toInt(); ++i)
      if (archive.try_read("torch_cuda_rng_" + std::to_string(i), state)) file.rng["cuda:" + std::to_string(i)] = state;
  file.write(to);
}

} // namespace splitseg::engine
