#include "core/run/CheckpointInfo.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/base/JsonNumbers.h"

#include <limits>

namespace splitseg::run {

std::string CheckpointInfo::toMetaJson() const {
  const nlohmann::json meta{{"version", kCheckpointVersion}, {"run", run.toJson()}, {"step", step}, {"sample_rng", sampleRng}};
  return meta.dump();
}

namespace {
// The sampler state is 312 numbers of at most 20 digits; anything much longer is not one.
constexpr std::size_t kMaxRngText = 312 * 21 + 64;

// Version 1 kept the run's fields at the top level. They move where version 2 keeps them, as they
// are, so RunSpec::fromJson checks their types and ranges (a float batch must not be cast).
RunSpec versionOneRun(const nlohmann::json& meta) {
  nlohmann::json r = nlohmann::json::object();
  r["splitseg_run"] = kRunSpecVersion;
  r["network"] = {{"architecture", meta.at("architecture")}, {"options", meta.at("options")}};
  const auto& placement = meta.at("placement");
  r["placement"] = placement.is_object() && placement.contains("stages") ? placement.at("stages") : placement;
  for (const char* key : {"precision", "patch", "batch", "learning_rate", "seed"})
    if (meta.contains(key)) r[key] = meta.at(key);
  if (!meta.contains("patch")) r["patch"] = {32, 32, 32};  // version 1's default, not today's
  // Version 1's preprocessing is read leniently (unknown keys ignored), as it always was.
  r["preprocessing"] =
      nlohmann::json::parse(Preprocessing::fromJson(meta.value("preprocessing", nlohmann::json::object()).dump()).toJson());
  return RunSpec::fromJson(r);
}
} // namespace

CheckpointInfo CheckpointInfo::fromMetaJson(const std::string& text, const std::string& path) {
  CheckpointInfo info;
  try {
    nlohmann::json meta;
    try {
      meta = parseJson(text, path);
    } catch (const JsonRefused& e) {
      throw FormatError(path, "checkpoint metadata is damaged: " + e.detail());
    }
    if (!meta.is_object()) throw FormatError(path, "checkpoint metadata is not a JSON object");
    const auto& versionJson = meta.at("version");
    const auto version = wholeNumberIn(versionJson, 1, INT32_MAX);
    if (!version)
      throw FormatError(path, "checkpoint version " + versionJson.dump().substr(0, 40) + " does not exist");
    if (*version > kCheckpointVersion)
      throw FormatError(path, "checkpoint version " + std::to_string(*version) + " is newer than this SplitSeg reads");
    const auto& stepJson = meta.at("step");
    const auto step = wholeNumberIn(stepJson, 0, INT64_MAX);
    if (!step) throw FormatError(path, "checkpoint step " + stepJson.dump().substr(0, 40) + " is not a whole number >= 0");
    info.step = *step;
    info.sampleRng = meta.value("sample_rng", std::string());
    if (info.sampleRng.size() > kMaxRngText) throw FormatError(path, "checkpoint sample_rng is not a generator state");
    info.run = *version >= 2 ? RunSpec::fromJson(meta.at("run")) : versionOneRun(meta);
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
