#include "core/run/CheckpointInfo.h"
#include "core/base/Error.h"

#include <limits>

namespace splitseg::run {

std::string CheckpointInfo::toMetaJson() const {
  const nlohmann::json meta{{"version", kCheckpointVersion}, {"run", run.toJson()}, {"step", step}, {"sample_rng", sampleRng}};
  return meta.dump();
}

namespace {
// The sampler state is 312 numbers of at most 20 digits; anything much longer is not one.
constexpr std::size_t kMaxRngText = 312 * 21 + 64;

RunSpec versionOneRun(const nlohmann::json& meta) {
  RunSpec r;
  r.architecture = meta.at("architecture").get<std::string>();
  r.networkOptions = meta.at("options");
  const auto& stages = meta.at("placement").contains("stages") ? meta.at("placement").at("stages") : meta.at("placement");
  for (auto it = stages.begin(); it != stages.end(); ++it) r.placement[it.key()] = it.value().get<std::string>();
  r.precision = placement::StagePrecisions::parse(meta.value("precision", std::string("fp32")));
  r.patch = meta.value("patch", std::array<std::int64_t, 3>{32, 32, 32});
  r.batch = meta.value("batch", 1);
  r.learningRate = meta.value("learning_rate", 1e-3);
  r.seed = meta.value("seed", std::uint64_t{0});
  r.preprocessing = Preprocessing::fromJson(meta.value("preprocessing", nlohmann::json::object()).dump());
  // The same checks a version-2 run gets.
  return RunSpec::fromJson(r.toJson());
}
} // namespace

CheckpointInfo CheckpointInfo::fromMetaJson(const std::string& text, const std::string& path) {
  CheckpointInfo info;
  try {
    const auto meta = nlohmann::json::parse(text);
    if (!meta.is_object()) throw FormatError(path, "checkpoint metadata is not a JSON object");
    const int version = meta.at("version").get<int>();
    if (version < 1) throw FormatError(path, "checkpoint version " + std::to_string(version) + " does not exist");
    if (version > kCheckpointVersion)
      throw FormatError(path, "checkpoint version " + std::to_string(version) + " is newer than this SplitSeg reads");
    info.step = meta.at("step").get<std::int64_t>();
    if (info.step < 0) throw FormatError(path, "checkpoint step " + std::to_string(info.step) + " is negative");
    info.sampleRng = meta.value("sample_rng", std::string());
    if (info.sampleRng.size() > kMaxRngText) throw FormatError(path, "checkpoint sample_rng is not a generator state");
    info.run = version >= 2 ? RunSpec::fromJson(meta.at("run")) : versionOneRun(meta);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, std::string("checkpoint metadata is damaged: ") + e.what());
  } catch (const FormatError&) {
    throw;
  } catch (const Error& e) {
    throw FormatError(path, std::string("checkpoint run description: ") + e.what());
  }
  return info;
}

} // namespace splitseg::run
