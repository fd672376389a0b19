#include "core/run/CheckpointInfo.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/base/JsonReader.h"

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
nlohmann::json versionOneRun(JsonReader& meta) {
  nlohmann::json r = nlohmann::json::object();
  r["splitseg_run"] = kRunSpecVersion;
  r["network"] = {{"architecture", meta.require("architecture").json()}, {"options", meta.require("options").json()}};
  // {"stages": {stage: device}} or {stage: device}.
  const JsonField placement = meta.require("placement");
  auto stages = placement.fields(UnknownKeys::Ignore).take("stages");
  r["placement"] = (stages ? *stages : placement).json();
  r["patch"] = {32, 32, 32};  // version 1's default, not today's
  for (const char* key : {"precision", "patch", "batch", "learning_rate", "seed"})
    if (const auto v = meta.take(key)) r[key] = v->json();
  // Version 1's preprocessing is read leniently (unknown keys ignored), as it always was.
  static const nlohmann::json none = nlohmann::json::object();
  const auto pre = meta.take("preprocessing");
  r["preprocessing"] = nlohmann::json::parse(
      Preprocessing::fromJson(pre ? *pre : JsonField(none, "preprocessing"), UnknownKeys::Ignore).toJson());
  return r;
}

// "checkpoint <key> <value> <refusal>", as checkpoints have always been refused.
std::int64_t wholeOf(const JsonField& f, std::int64_t lo, std::int64_t hi, const std::string& path,
                     const std::string& refusal) {
  try {
    return f.wholeIn(lo, hi);
  } catch (const JsonFieldError&) {
    throw FormatError(path, "checkpoint " + f.path() + " " + f.shown() + " " + refusal);
  }
}

CheckpointInfo readMeta(const nlohmann::json& j, const std::string& path) {
  CheckpointInfo info;
  nlohmann::json run;
  {
    // Only the keys of this version matter; a version-1 file holds its run's loose keys too.
    auto meta = [&] {
      try {
        return JsonReader::document(j, "checkpoint metadata", UnknownKeys::Ignore);
      } catch (const JsonFieldError&) {
        throw FormatError(path, "checkpoint metadata is not a JSON object");
      }
    }();
    const auto version = wholeOf(meta.require("version"), 1, INT32_MAX, path, "does not exist");
    if (version > kCheckpointVersion)
      throw FormatError(path, "checkpoint version " + std::to_string(version) + " is newer than this SplitSeg reads");
    info.step = wholeOf(meta.require("step"), 0, INT64_MAX, path, "is not a whole number >= 0");
    meta.read("sample_rng", info.sampleRng);
    if (info.sampleRng.size() > kMaxRngText) throw FormatError(path, "checkpoint sample_rng is not a generator state");
    run = version >= 2 ? meta.require("run").json() : versionOneRun(meta);
  }
  try {
    info.run = RunSpec::fromJson(run);
  } catch (const Error& e) {
    throw FormatError(path, std::string("checkpoint run description: ") + e.what());
  }
  return info;
}
} // namespace

CheckpointInfo CheckpointInfo::fromMetaJson(const std::string& text, const std::string& path) {
  nlohmann::json meta;
  try {
    meta = parseJson(text, path);
  } catch (const JsonRefused& e) {
    throw FormatError(path, "checkpoint metadata is damaged: " + e.detail());
  }
  try {
    return readMeta(meta, path);
  } catch (const JsonFieldError& e) {
    throw FormatError(path, std::string("checkpoint metadata is damaged: ") + e.what());
  }
}

} // namespace splitseg::run
