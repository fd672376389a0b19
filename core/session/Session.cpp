#include "core/session/Session.h"

#include "core/base/Printable.h"
#include "core/base/JsonText.h"
#include "core/base/DurableFile.h"
#include "core/base/Error.h"
#include "core/base/JsonReader.h"
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

// Version 1 sessions kept the run in loose keys; these read them into a run description.
void readVersion1Training(JsonReader& t, run::RunSpec& r) {
  t.read("steps", r.steps);
  t.read("epochs", r.epochs);
  t.read("steps_per_epoch", r.stepsPerEpoch);
  t.read("batch", r.batch);
  t.read("lr", r.learningRate);
  t.read("seed", r.seed);
  if (const auto p = t.take("patch")) r.patch = p->tuple<std::int64_t, 3>();
  r.precision = placement::StagePrecisions::parse("fp32");
  t.read("precision", r.precision, [](const std::string& p) { return placement::StagePrecisions::parse(p); });
  if (const auto rc = t.take("recompute"))
    for (const auto& stage : rc->list<std::string>()) r.recompute.insert(stage);
  const auto keep = r.preprocessing.intensity;  // "": the run's own
  t.read("intensity", r.preprocessing.intensity,
         [&](const std::string& name) { return name.empty() ? keep : intensityPreset(name); });
  if (const auto sp = t.take("spacing")) r.preprocessing.targetSpacing = sp->tuple<double, 3>();
  t.read("validate_every", r.validateEvery);
  t.read("checkpoint_every", r.checkpointEvery);
  t.read("cpu_budget", r.cpuBudgetBytes,
         [](const std::string& b) { return b.empty() ? std::int64_t{0} : parseBytes(b); });
}

run::RunSpec runFromVersion1(JsonReader& top) {
  run::RunSpec r;
  {
    auto net = top.sub("network");
    net.read("architecture", r.architecture);
    net.read("options", r.networkOptions);
  }
  // {"stages": {stage: device}} or {stage: device}.
  if (const auto p = top.take("placement")) {
    const auto stages = p->fields(UnknownKeys::Ignore).take("stages");
    for (const auto& [stage, device] : (stages ? *stages : *p).entries()) r.placement[stage] = device.as<std::string>();
  }
  {
    auto t = top.sub("training");
    readVersion1Training(t, r);
  }
  top.read("dataset", r.data.dataset);
  if (!r.data.dataset.empty()) r.data.kind = run::DataKind::Dataset;
  top.read("checkpoint", r.checkpoint);
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
  // Version 1 kept loose keys of its own (read below); version 2 holds these four only.
  auto top = JsonReader::document(j, "not a SplitSeg session", UnknownKeys::Ignore);
  const auto version = top.take("splitseg_session");
  if (!version) throw InvalidArgument("not a SplitSeg session (no \"splitseg_session\" version)");
  s.version = version->as<int>();
  if (s.version > kSessionVersion)
    throw InvalidArgument("session version " + std::to_string(s.version) + " is newer than this SplitSeg reads (" +
                          std::to_string(kSessionVersion) + ")");
  const auto volumes = top.take("volumes"), runField = top.take("run"), view = top.take("view");
  if (s.version >= 2) {
    top.setUnknownKeys(UnknownKeys::Refuse);
    top.finish();
  }
  if (volumes)
    for (const auto& v : volumes->elements()) {
      auto entry = v.fields(UnknownKeys::Ignore);  // a volume's other keys were always ignored
      VolumeRef r;
      r.path = fromStored(entry.get<std::string>("path"), baseDir);
      entry.read("role", r.role);
      entry.read("name", r.name);
      s.volumes.push_back(r);
    }
  if (s.version < 2) {
    s.run = runFromVersion1(top);
  } else if (runField) {
    try {
      s.run = run::RunSpec::fromJson(runField->json());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("run.") + e.what());
    }
  }
  mapRunPaths(s.run, [&](const std::string& p) { return fromStored(p, baseDir); });
  if (view) s.view = view->json();
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
