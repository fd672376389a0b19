#include "core/session/Session.h"
#include "core/base/Error.h"

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

nlohmann::json toJson(const Session& s, const std::string& baseDir) {
  nlohmann::json volumes = nlohmann::json::array();
  for (const auto& v : s.volumes)
    volumes.push_back({{"path", toStored(v.path, baseDir)}, {"role", v.role}, {"name", v.name}});
  const auto& t = s.training;
  nlohmann::json training{{"steps", t.steps},
                          {"epochs", t.epochs},
                          {"steps_per_epoch", t.stepsPerEpoch},
                          {"batch", t.batch},
                          {"lr", t.learningRate},
                          {"seed", t.seed},
                          {"patch", t.patch},
                          {"precision", t.precision},
                          {"recompute", t.recompute},
                          {"intensity", t.intensity},
                          {"spacing", t.spacing},
                          {"validate_every", t.validateEvery},
                          {"checkpoint_every", t.checkpointEvery},
                          {"cpu_budget", t.cpuBudget}};
  return {{"splitseg_session", kSessionVersion},
          {"volumes", volumes},
          {"dataset", toStored(s.dataset, baseDir)},
          {"network", {{"architecture", s.architecture}, {"options", s.options}}},
          {"placement", s.placement},
          {"training", training},
          {"checkpoint", toStored(s.checkpoint, baseDir)},
          {"view", s.view}};
}

Session fromJson(const nlohmann::json& j, const std::string& baseDir) {
  Session s;
  try {
    if (!j.is_object() || !j.contains("splitseg_session"))
      throw InvalidArgument("not a SplitSeg session (no \"splitseg_session\" version)");
    s.version = j.at("splitseg_session").get<int>();
    if (s.version > kSessionVersion)
      throw InvalidArgument("session version " + std::to_string(s.version) + " is newer than this SplitSeg reads (" +
                            std::to_string(kSessionVersion) + ")");
    if (j.contains("volumes"))
      for (const auto& v : j.at("volumes")) {
        VolumeRef r;
        r.path = fromStored(v.at("path").get<std::string>(), baseDir);
        read(v, "role", r.role);
        read(v, "name", r.name);
        s.volumes.push_back(r);
      }
    std::string stored;
    read(j, "dataset", stored);
    s.dataset = fromStored(stored, baseDir);
    if (j.contains("network")) {
      read(j.at("network"), "architecture", s.architecture);
      read(j.at("network"), "options", s.options);
    }
    read(j, "placement", s.placement);
    if (j.contains("training")) {
      const auto& tj = j.at("training");
      auto& t = s.training;
      read(tj, "steps", t.steps);
      read(tj, "epochs", t.epochs);
      read(tj, "steps_per_epoch", t.stepsPerEpoch);
      read(tj, "batch", t.batch);
      read(tj, "lr", t.learningRate);
      read(tj, "seed", t.seed);
      read(tj, "patch", t.patch);
      read(tj, "precision", t.precision);
      read(tj, "recompute", t.recompute);
      read(tj, "intensity", t.intensity);
      read(tj, "spacing", t.spacing);
      read(tj, "validate_every", t.validateEvery);
      read(tj, "checkpoint_every", t.checkpointEvery);
      read(tj, "cpu_budget", t.cpuBudget);
    }
    stored.clear();
    read(j, "checkpoint", stored);
    s.checkpoint = fromStored(stored, baseDir);
    read(j, "view", s.view);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("session: ") + e.what());
  }
  return s;
}

LoadResult loadSession(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path, fs::exists(path) ? "cannot read session" : "session file not found");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, std::string("session is not valid JSON: ") + e.what());
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
  if (!s.dataset.empty() && !fs::exists(s.dataset)) {
    s.datasetMissing = true;
    r.warnings.push_back("dataset folder not found: " + s.dataset);
  }
  if (!s.checkpoint.empty() && !fs::exists(s.checkpoint)) {
    s.checkpointMissing = true;
    r.warnings.push_back("checkpoint not found: " + s.checkpoint + " (training will create it)");
  }
  return r;
}

void saveSession(const Session& s, const std::string& path) {
  const fs::path target = fs::absolute(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  const std::string text = toJson(s, target.parent_path().string()).dump(2) + "\n";
  const fs::path tmp = target.string() + ".part";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw IoError(path, "cannot write session");
  }
  fs::rename(tmp, target, ec);
  if (ec) throw IoError(path, "cannot write session: " + ec.message());
}

} // namespace splitseg::session
