#include "core/session/Session.h"

#include "core/base/Printable.h"
#include "core/base/JsonText.h"
#include "core/base/DurableFile.h"
#include "core/base/Error.h"
#include "core/base/JsonNumbers.h"
#include "core/base/Units.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace splitseg::session {

namespace {

// Relative when the target is reachable with few "..": a project folder moves as a whole, but
// a path to /data from /home/me/project stays absolute (moving the project would break it).
std::string toStored(const std::string& path, const std::string& baseDir) {
  if (path.empty() || baseDir.empty()) return path;
  const fs::path abs = fs::absolute(path).lexically_normal();
  const fs::path rel = abs.lexically_relative(fs::absolute(baseDir).lexically_normal());
  if (rel.empty()) return abs.string();
  int ups = 0;
  for (const auto& part : rel)
    if (part == "..") ++ups;
  return ups <= 2 ? rel.generic_string() : abs.string();
}

std::string fromStored(const std::string& stored, const std::string& baseDir) {
  if (stored.empty()) return stored;
  fs::path p(stored);
  if (p.is_relative() && !baseDir.empty()) p = fs::path(baseDir) / p;
  return fs::absolute(p).lexically_normal().string();
}

template <typename T>
void read(const nlohmann::json& j, const char* key, T& out) {
  if (j.contains(key) && !j.at(key).is_null()) out = j.at(key).get<T>();
}

} // namespace

const VolumeRef* Session::firstVolume(const std::string& role) const {
  for (const auto& v : volumes)
    if (v.role == role) return &v;
  return nullptr;
}

namespace {
// The run's file paths, rewritten by `f` (stored <-> absolute).
template <typename F>
void mapRunPaths(run::RunSpec& r, F f) {
  r.data.image = f(r.data.image);
  r.data.label = f(r.data.label);
  r.data.dataset = f(r.data.dataset);
  r.checkpoint = f(r.checkpoint);
}

// Version 1 sessions kept the run in loose keys; this reads them into a run description.
run::RunSpec runFromVersion1(const nlohmann::json& j) {
  run::RunSpec r;
  if (j.contains("network")) {
    read(j.at("network"), "architecture", r.architecture);
    read(j.at("network"), "options", r.networkOptions);
  }
  if (j.contains("placement") && j.at("placement").is_object()) {
    const auto& p = j.at("placement").contains("stages") ? j.at("placement").at("stages") : j.at("placement");
    for (auto it = p.begin(); it != p.end(); ++it) r.placement[it.key()] = it.value().get<std::string>();
  }
  if (j.contains("training")) {
    const auto& t = j.at("training");
    read(t, "steps", r.steps);
    read(t, "epochs", r.epochs);
    read(t, "steps_per_epoch", r.stepsPerEpoch);
    read(t, "batch", r.batch);
    read(t, "lr", r.learningRate);
    read(t, "seed", r.seed);
    read(t, "patch", r.patch);
    std::string precision = "fp32", intensity, budget;
    read(t, "precision", precision);
    r.precision = placement::StagePrecisions::parse(precision);
    std::vector<std::string> recompute;
    read(t, "recompute", recompute);
    r.recompute = {recompute.begin(), recompute.end()};
    read(t, "intensity", intensity);
    if (!intensity.empty()) r.preprocessing.intensity = intensityPreset(intensity);
    read(t, "spacing", r.preprocessing.targetSpacing);
    read(t, "validate_every", r.validateEvery);
    read(t, "checkpoint_every", r.checkpointEvery);
    read(t, "cpu_budget", budget);
    if (!budget.empty()) r.cpuBudgetBytes = parseBytes(budget);
  }
  read(j, "dataset", r.data.dataset);
  if (!r.data.dataset.empty()) r.data.kind = run::DataKind::Dataset;
  read(j, "checkpoint", r.checkpoint);
  return r;
}
} // namespace

nlohmann::json toJson(const Session& s, const std::string& baseDir, bool forDisplay) {
  // A Linux file name is bytes; a session file (JSON) holds UTF-8 text only. Refused by name
  // rather than stored altered, so a saved session never points at another file.
  const auto storable = [forDisplay](const std::string& text, const char* what) {
    if (forDisplay && !isUtf8(text)) return printable(text);
    if (!isUtf8(text))
      throw InvalidArgument(std::string(what) + " " + printable(text) +
                            " is not UTF-8 text, which a session file cannot hold; rename it and add it again");
    return text;
  };
  nlohmann::ordered_json volumes = nlohmann::ordered_json::array();
  for (const auto& v : s.volumes)
    volumes.push_back({{"path", storable(toStored(v.path, baseDir), "volume path")},
                       {"role", storable(v.role, "volume role")},
                       {"name", storable(v.name, "volume name")}});
  run::RunSpec stored = s.run;
  mapRunPaths(stored, [&](const std::string& p) { return storable(toStored(p, baseDir), "path"); });
  nlohmann::ordered_json out{{"splitseg_session", kSessionVersion},
                             {"volumes", volumes},
                             {"run", stored.toJson()},
                             {"view", s.view}};
  return nlohmann::json::parse(out.dump());
}

Session fromJson(const nlohmann::json& j, const std::string& baseDir) {
  Session s;
  try {
    if (!j.is_object() || !j.contains("splitseg_session"))
      throw InvalidArgument("not a SplitSeg session (no \"splitseg_session\" version)");
    const auto version = wholeNumberIn(j.at("splitseg_session"), INT32_MIN, INT32_MAX);
    if (!version) throw InvalidArgument("splitseg_session: expected a whole number");
    s.version = static_cast<int>(*version);
    if (s.version > kSessionVersion)
      throw InvalidArgument("session version " + std::to_string(s.version) + " is newer than this SplitSeg reads (" +
                            std::to_string(kSessionVersion) + ")");
    if (s.version >= 2)
      for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "splitseg_session" && it.key() != "volumes" && it.key() != "run" && it.key() != "view")
          throw InvalidArgument(it.key() + ": unknown key");
    if (j.contains("volumes"))
      for (const auto& v : j.at("volumes")) {
        VolumeRef r;
        r.path = fromStored(v.at("path").get<std::string>(), baseDir);
        read(v, "role", r.role);
        read(v, "name", r.name);
        s.volumes.push_back(r);
      }
    if (s.version >= 2) {
      if (j.contains("run")) {
        try {
          s.run = run::RunSpec::fromJson(j.at("run"));
        } catch (const InvalidArgument& e) {
          throw InvalidArgument(std::string("run.") + e.what());
        }
      }
    } else {
      s.run = runFromVersion1(j);
    }
    mapRunPaths(s.run, [&](const std::string& p) { return fromStored(p, baseDir); });
    read(j, "view", s.view);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("session: ") + e.what());
  }
  return s;
}

LoadResult loadSession(const std::string& path) {
  if (!fs::exists(path)) throw IoError(path, "session file not found");
  nlohmann::json j;
  try {
    j = readJsonFile(path);
  } catch (const JsonRefused& e) {
    throw FormatError(path, "session " + e.detail());
  }
  LoadResult r;
  try {
    r.session = fromJson(j, fs::absolute(path).parent_path().string());
  } catch (const InvalidArgument& e) {
    throw FormatError(path, e.what());
  }
  // Missing files are reported, not fatal: the rest of the session is still worth opening.
  auto& s = r.session;
  for (auto& v : s.volumes)
    if (!fs::exists(v.path)) {
      v.missing = true;
      r.warnings.push_back(v.role + " volume not found: " + v.path);
    }
  if (!s.run.data.dataset.empty() && !fs::exists(s.run.data.dataset)) {
    s.datasetMissing = true;
    r.warnings.push_back("dataset folder not found: " + s.run.data.dataset);
  }
  // Where training writes is the user's choice, not a shared file's: a checkpoint outside the
  // session's folder (absolute elsewhere, or "..") is not used.
  if (!s.run.checkpoint.empty()) {
    const fs::path folder = fs::weakly_canonical(fs::absolute(path).parent_path());
    const fs::path target = fs::weakly_canonical(fs::absolute(s.run.checkpoint));
    const auto rel = target.lexically_relative(folder);
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") {
      r.warnings.push_back("checkpoint " + s.run.checkpoint + " lies outside the session's folder " + folder.string() +
                           ": not used (a session may not choose where training writes; pick a checkpoint or pass "
                           "--save)");
      s.run.checkpoint.clear();
    }
  }
  if (!s.run.checkpoint.empty() && !fs::exists(s.run.checkpoint)) {
    s.checkpointMissing = true;
    r.warnings.push_back("checkpoint not found: " + s.run.checkpoint + " (training will create it)");
  }
  return r;
}

void saveSession(const Session& s, const std::string& path) {
  const fs::path target = fs::absolute(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  const std::string text = toJson(s, target.parent_path().string()).dump(2) + "\n";
  writeFileDurably(target.string(), text);  // unique temporary, fsync, rename, fsync folder
}

} // namespace splitseg::session
