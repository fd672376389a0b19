#include "core/run/RunSpec.h"
#include "core/base/JsonReader.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace splitseg::run {

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

} // namespace

Preprocessing defaultPreprocessing() {
  Preprocessing p;
  p.intensity = intensityPreset("ct-soft-tissue");
  return p;
}

std::string toString(DataKind k) {
  switch (k) {
    case DataKind::None: return "none";
    case DataKind::Synthetic: return "synthetic";
    case DataKind::Volume: return "volume";
    case DataKind::Pairs: return "pairs";
    case DataKind::Dataset: return "dataset";
  }
  return "none";
}

DataKind dataKindFromString(const std::string& s) {
  for (auto k : {DataKind::None, DataKind::Synthetic, DataKind::Volume, DataKind::Pairs, DataKind::Dataset})
    if (toString(k) == s) return k;
  throw InvalidArgument("unknown data source '" + s + "' (none, synthetic, volume, pairs, dataset)");
}

std::string toString(LrSchedule s) {
  switch (s) {
    case LrSchedule::Constant: return "constant";
    case LrSchedule::Poly: return "poly";
    case LrSchedule::Cosine: return "cosine";
  }
  return "constant";
}

LrSchedule lrScheduleFromString(const std::string& s) {
  for (auto k : {LrSchedule::Constant, LrSchedule::Poly, LrSchedule::Cosine})
    if (toString(k) == s) return k;
  throw InvalidArgument("unknown learning-rate schedule '" + s + "' (constant, poly, cosine)");
}

double RunSpec::learningRateAt(std::int64_t stepsDone) const {
  const double t = std::clamp(static_cast<double>(stepsDone) / static_cast<double>(std::max<std::int64_t>(1, totalSteps())), 0.0, 1.0);
  switch (lrSchedule) {
    case LrSchedule::Constant: return learningRate;
    case LrSchedule::Poly: return learningRate * std::pow(1.0 - t, 0.9);  // nnU-Net's exponent
    case LrSchedule::Cosine: return learningRate * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  return learningRate;
}

std::string mirrorToString(const std::array<bool, 3>& axes) {
  std::string s;
  for (int a = 0; a < 3; ++a)
    if (axes[static_cast<std::size_t>(a)]) s += "xyz"[a];
  return s;
}

std::array<bool, 3> mirrorFromString(const std::string& s) {
  std::array<bool, 3> axes{false, false, false};
  if (s == "none") return axes;
  for (char c : s) {
    const auto at = std::string("xyz").find(c);
    if (at == std::string::npos || axes[at])
      throw InvalidArgument("mirror axes '" + s + "': give each of x, y, z at most once (\"xyz\": all), or none");
    axes[at] = true;
  }
  return axes;
}

int mirrorPasses(const std::array<bool, 3>& mirror) {
  return 1 << ((mirror[0] ? 1 : 0) + (mirror[1] ? 1 : 0) + (mirror[2] ? 1 : 0));
}

bool DataSpec::operator==(const DataSpec& o) const {
  return kind == o.kind && image == o.image && label == o.label && dataset == o.dataset &&
         validationFraction == o.validationFraction;
}

placement::Placement RunSpec::resolvePlacement(const std::vector<std::string>& stages,
                                               const std::string& defaultDevice) const {
  auto p = placement::Placement::uniform(stages, defaultDevice);
  for (const auto& [stage, device] : placement) {
    if (std::find(stages.begin(), stages.end(), stage) == stages.end())
      throw InvalidArgument("placement: unknown stage '" + stage + "' (stages: " + joined(stages) + ")");
    p.assign(stage, device);
  }
  return p;
}

void RunSpec::setPlacement(const placement::Placement& p) {
  placement.clear();
  for (const auto& s : p.stages()) placement[s] = p.entryOf(s);
}

planner::PlanRequest RunSpec::planRequest(const std::vector<std::string>& stages,
                                            const std::vector<planner::DeviceSpec>& devices) const {
  if (devices.empty()) throw InvalidArgument("planner: no devices to plan for");
  planner::PlanRequest r;
  r.size = {patch[2], patch[1], patch[0]};
  r.batch = batch;
  r.microBatches = std::min(std::max(1, microBatches), std::max(1, batch));
  r.precision = precision;
  r.checkpoint = recompute;
  r.offload = offload;
  r.cpuChannelsLast = planner::usesChannelsLast(cpuLayout);
  r.placement = resolvePlacement(stages, devices.front().name);
  r.devices = devices;
  // The run's CPU budget (the tensor bytes a process's CPU may hold: a step's or a prediction's,
  // with the weights and Adam's moments) is every CPU's capacity, plus the allowance the planner
  // adds for what is no tensor: a plan fits when the budget's check counts what the plan counts.
  // Every rank keeps to the same budget (Trainer, PipelineTrainer, SpatialTrainer, ranks::PeakMeter).
  if (cpuBudgetBytes > 0)
    for (auto& d : r.devices)
      if (!d.isCuda()) {
        const std::int64_t allowance = d.allowance >= 0 ? d.allowance : planner::PlannerOptions{}.cpuAllowanceBytes;
        const std::int64_t cap = cpuBudgetBytes + allowance;
        d.capacity = d.capacity > 0 ? std::min(d.capacity, cap) : cap;
      }
  r.shardAxis = shardAxis;
  r.shardSlabs = shardSlabs;
  return r;
}

planner::PlanRequest RunSpec::inferencePlanRequest(const std::vector<std::string>& stages,
                                                     const std::vector<planner::DeviceSpec>& devices,
                                                     const std::array<std::int64_t, 3>& volumeZyx,
                                                     int windowsPerPass) const {
  planner::PlanRequest r = planRequest(stages, devices);
  r.inference = true;
  r.volume = volumeZyx;
  const bool whole = window[0] <= 0 || window[1] <= 0 || window[2] <= 0;
  r.size = whole ? std::array<std::int64_t, 3>{0, 0, 0} : std::array<std::int64_t, 3>{window[2], window[1], window[0]};
  r.overlap = overlap;
  r.mirror = mirror[0] || mirror[1] || mirror[2];
  r.batch = std::max(1, windowsPerPass);
  r.microBatches = std::min(std::max(1, microBatches), r.batch);
  r.checkpoint.clear();
  r.offload = false;
  r.cpuChannelsLast = true;
  return r;
}

std::vector<Problem> RunSpec::validate(const std::vector<std::string>& devices,
                                       const std::vector<std::string>& stages) const {
  std::vector<Problem> out;
  auto bad = [&](const std::string& field, const std::string& message) { out.push_back({field, message}); };
  if (architecture.empty()) bad("network.architecture", "must name an architecture");
  if (!networkOptions.is_object()) bad("network.options", "must be an object");
  for (int i = 0; i < 3; ++i)
    if (patch[i] < 1 || patch[i] > 4096) bad("patch", "each size must be 1..4096 voxels");
  if (batch < 1 || batch > 4096) bad("batch", "must be 1..4096");
  if (microBatches < 1 || (batch >= 1 && microBatches > batch))
    bad("micro_batches", "must be 1..batch (" + std::to_string(batch) + "): each micro-batch holds at least one sample");
  if (rankTimeoutSeconds < 1 || rankTimeoutSeconds > 86400) bad("rank_timeout", "must be 1..86400 seconds");
  if (steps < 1) bad("schedule.steps", "must be at least 1");
  if (epochs < 0) bad("schedule.epochs", "must not be negative");
  if (epochs > 0 && stepsPerEpoch < 1) bad("schedule.steps_per_epoch", "must be at least 1");
  if (validateEvery < 0) bad("schedule.validate_every", "must not be negative");
  if (checkpointEvery < 0) bad("schedule.checkpoint_every", "must not be negative");
  if (!std::isfinite(learningRate) || learningRate <= 0 || learningRate > 10)
    bad("learning_rate", "must be a number in (0, 10]");
  if (cpuBudgetBytes < 0) bad("cpu_budget", "must not be negative");
  for (int i = 0; i < 3; ++i)
    if (window[i] < 0 || window[i] > 4096) bad("inference.window", "each size must be 0..4096 (0: whole volume)");
  if (!(overlap >= 0 && overlap < 1)) bad("inference.overlap", "must be in [0, 1)");
  if (!(data.validationFraction >= 0 && data.validationFraction < 1))
    bad("data.validation_fraction", "must be in [0, 1)");
  switch (data.kind) {
    case DataKind::Volume:
      if (data.image.empty()) bad("data.image", "a volume run needs an image");
      break;
    case DataKind::Pairs:
      if (data.image.empty()) bad("data.image", "an image/label run needs an image");
      if (data.label.empty()) bad("data.label", "an image/label run needs a label");
      break;
    case DataKind::Dataset:
      if (data.dataset.empty()) bad("data.dataset", "a dataset run needs a dataset folder");
      break;
    default: break;
  }
  std::string rankStage;  // the first stage placed on a rank
  for (const auto& [stage, device] : placement) {
    const std::string field = "placement." + stage;
    if (!stages.empty() && std::find(stages.begin(), stages.end(), stage) == stages.end())
      bad(field, "unknown stage (stages: " + joined(stages) + ")");
    std::string canonical;
    try {
      canonical = placement::canonicalEntry(device);
    } catch (const InvalidArgument& e) {
      bad(field, e.what());
      continue;
    }
    // Another rank's device is checked by that rank when it joins.
    for (const auto& shard : placement::splitShards(canonical))
      if (!devices.empty() && placement::splitRank(shard).rank < 0 &&
          std::find(devices.begin(), devices.end(), shard) == devices.end())
        bad(field, "device '" + shard + "' is not available (available: " + joined(devices) + ")");
    const bool onRank = placement::splitRank(placement::splitShards(canonical).front()).rank >= 0;
    if (offload && onRank)
      bad("offload", "host offload runs in one process; stage " + stage + " is on a rank (keep offload off with ranks)");
    if (onRank && rankStage.empty()) rankStage = stage;
  }
  if (cpuLayout == planner::CpuLayout::ChannelsLast && !rankStage.empty())
    bad("cpu_layout", "channels-last CPU weights apply to one process; stage " + rankStage +
                          " is on a rank, and ranks train NCDHW (use auto or ncdhw with ranks)");
  if (!stages.empty()) {
    for (const auto& s : recompute)
      if (std::find(stages.begin(), stages.end(), s) == stages.end()) bad("recompute", "unknown stage '" + s + "'");
    for (const auto& [s, p] : precision.stages)
      if (std::find(stages.begin(), stages.end(), s) == stages.end()) bad("precision", "unknown stage '" + s + "'");
  }
  return out;
}

void RunSpec::check(const std::vector<std::string>& devices, const std::vector<std::string>& stages) const {
  const auto problems = validate(devices, stages);
  if (!problems.empty()) throw InvalidArgument("run." + problems.front().text());
}

nlohmann::ordered_json RunSpec::toJson() const {
  nlohmann::ordered_json placementJson = nlohmann::ordered_json::object();
  for (const auto& [stage, device] : placement) placementJson[stage] = device;
  nlohmann::ordered_json j;
  j["splitseg_run"] = kRunSpecVersion;
  j["network"] = {{"architecture", architecture}, {"options", nlohmann::ordered_json::parse(networkOptions.dump())}};
  j["placement"] = placementJson;
  j["precision"] = precision.toString();
  j["recompute"] = std::vector<std::string>(recompute.begin(), recompute.end());
  j["offload"] = offload;
  j["cpu_layout"] = planner::toString(cpuLayout);
  nlohmann::ordered_json slabs = nlohmann::ordered_json::object();
  for (const auto& [entry, sizes] : shardSlabs) slabs[entry] = sizes;
  j["shard"] = {{"axis", placement::toString(shardAxis)}, {"slabs", slabs}};
  j["patch"] = patch;
  j["batch"] = batch;
  j["micro_batches"] = microBatches;
  j["rank_timeout"] = rankTimeoutSeconds;
  j["timeline"] = timeline;
  j["schedule"] = {{"steps", steps},
                   {"epochs", epochs},
                   {"steps_per_epoch", stepsPerEpoch},
                   {"validate_every", validateEvery},
                   {"checkpoint_every", checkpointEvery}};
  j["learning_rate"] = learningRate;
  j["lr_schedule"] = toString(lrSchedule);
  j["seed"] = seed;
  j["cpu_budget"] = cpuBudgetBytes;
  j["preprocessing"] = nlohmann::ordered_json::parse(preprocessing.toJson());
  j["data"] = {{"source", toString(data.kind)},
               {"image", data.image},
               {"label", data.label},
               {"dataset", data.dataset},
               {"validation_fraction", data.validationFraction}};
  j["checkpoint"] = checkpoint;
  j["inference"] = {{"window", window}, {"overlap", overlap}, {"mirror", mirrorToString(mirror)},
                    {"keep_largest", keepLargest}};
  return j;
}

namespace {

// Each part of the run description from its keys of the top-level object.
void readNetwork(JsonReader& top, RunSpec& r) {
  auto net = top.sub("network");
  net.read("architecture", r.architecture);
  if (const auto o = net.take("options")) r.networkOptions = o->object();
}

void readPlacement(JsonReader& top, RunSpec& r) {
  if (const auto p = top.take("placement"))
    for (const auto& [stage, device] : p->entries(JsonField::kAny, "an object of stage: device"))
      r.placement[stage] = device.parsed([](const std::string& d) { return placement::canonicalEntry(d); });
  if (const auto p = top.take("precision"))
    r.precision = p->parsed([](const std::string& t) { return placement::StagePrecisions::parse(t); });
  if (const auto rc = top.take("recompute"))
    for (const auto& s : rc->list<std::string>(0, JsonField::kAny, "a list of stage names")) r.recompute.insert(s);
}

void readShard(JsonReader& top, RunSpec& r) {
  auto sh = top.sub("shard");
  sh.read("axis", r.shardAxis, [](const std::string& a) { return placement::shardAxisFromString(a); });
  if (const auto slabs = sh.take("slabs"))
    for (const auto& [entry, sizes] : slabs->entries(JsonField::kAny, "an object of \"dev+dev\": [sizes]")) {
      std::vector<std::int64_t> planes;
      for (const auto& s : sizes.elements(2, 64, "a list of 2..64 slab sizes")) planes.push_back(s.wholeIn(1, 65536));
      r.shardSlabs[sizes.checked([&, &entry = entry] { return placement::canonicalEntry(entry); })] = planes;
    }
}

void readSchedule(JsonReader& top, RunSpec& r) {
  auto s = top.sub("schedule");
  s.read("steps", r.steps);
  s.read("epochs", r.epochs);
  s.read("steps_per_epoch", r.stepsPerEpoch);
  s.read("validate_every", r.validateEvery);
  s.read("checkpoint_every", r.checkpointEvery);
}

void readData(JsonReader& top, RunSpec& r) {
  auto d = top.sub("data");
  d.read("source", r.data.kind, dataKindFromString);
  d.read("image", r.data.image);
  d.read("label", r.data.label);
  d.read("dataset", r.data.dataset);
  d.read("validation_fraction", r.data.validationFraction);
}

void readInference(JsonReader& top, RunSpec& r) {
  auto in = top.sub("inference");
  if (const auto w = in.take("window")) r.window = w->tuple<std::int64_t, 3>("three numbers [x, y, z]");
  in.read("overlap", r.overlap);
  in.read("keep_largest", r.keepLargest);
  in.read("mirror", r.mirror, mirrorFromString);
}

} // namespace

RunSpec RunSpec::fromJson(const nlohmann::json& j) {
  RunSpec r;
  auto top = JsonReader::document(j, "run description");
  int version = 0;
  top.read("splitseg_run", version);
  if (version < 1) throw InvalidArgument("splitseg_run: not a run description (version missing)");
  if (version > kRunSpecVersion)
    throw InvalidArgument("splitseg_run: version " + std::to_string(version) + " is newer than this SplitSeg reads (" +
                          std::to_string(kRunSpecVersion) + ")");
  readNetwork(top, r);
  readPlacement(top, r);
  readShard(top, r);
  if (const auto p = top.take("patch")) r.patch = p->tuple<std::int64_t, 3>("three numbers [x, y, z]");
  top.read("batch", r.batch);
  top.read("micro_batches", r.microBatches);
  top.read("rank_timeout", r.rankTimeoutSeconds);
  top.read("timeline", r.timeline);
  top.read("offload", r.offload);
  top.read("cpu_layout", r.cpuLayout, [](const std::string& l) { return planner::cpuLayoutFromString(l); });
  readSchedule(top, r);
  top.read("learning_rate", r.learningRate);
  top.read("lr_schedule", r.lrSchedule, lrScheduleFromString);
  top.read("seed", r.seed);
  top.read("cpu_budget", r.cpuBudgetBytes);
  // Preprocessing::fromJson(text) is lenient (old checkpoints); a run refuses unknown keys.
  if (const auto p = top.take("preprocessing")) r.preprocessing = Preprocessing::fromJson(*p, UnknownKeys::Refuse);
  readData(top, r);
  top.read("checkpoint", r.checkpoint);
  readInference(top, r);
  top.finish();
  return r;
}

RunSpec RunSpec::fromText(const std::string& text) {
  nlohmann::json j;
  try {
    j = parseJson(text, "run description");
  } catch (const JsonRefused& e) {
    throw InvalidArgument(e.what());
  }
  return fromJson(j);
}

std::array<std::int64_t, 3> parseSize(const std::string& text) {
  std::array<std::int64_t, 3> s{};
  std::stringstream ss(text);
  std::string part;
  int n = 0;
  try {
    while (std::getline(ss, part, ',')) {
      if (n >= 3) throw InvalidArgument("");
      std::size_t used = 0;
      s[n++] = std::stoll(part, &used);
      if (used != part.size()) throw InvalidArgument("");
    }
  } catch (const std::exception&) {
    throw InvalidArgument("size '" + text + "' must be N or X,Y,Z");
  }
  if (n == 1) s[1] = s[2] = s[0];
  else if (n != 3) throw InvalidArgument("size '" + text + "' must be N or X,Y,Z");
  for (auto v : s)
    if (v <= 0) throw InvalidArgument("size '" + text + "' must be positive");
  return s;
}

std::set<std::string> parseStageList(const std::string& text, const std::vector<std::string>& stages) {
  std::set<std::string> out;
  if (text.empty() || text == "none") return out;
  if (text == "all") return {stages.begin(), stages.end()};
  std::stringstream ss(text);
  std::string s;
  while (std::getline(ss, s, ',')) {
    if (s.empty()) continue;
    if (!stages.empty() && std::find(stages.begin(), stages.end(), s) == stages.end())
      throw InvalidArgument("unknown stage '" + s + "' (stages: " + joined(stages) + ")");
    out.insert(s);
  }
  return out;
}

} // namespace splitseg::run
