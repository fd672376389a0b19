#include "ui/session/Session.h"
#include "core/planner/MemoryPlanner.h"
#include "core/base/Error.h"

#include "core/engine/NetworkFactory.h"
#include "core/model/StagedNetwork.h"
#include "core/model/NetworkStructureOf.h"
#include "core/ranks/RunSecret.h"

#include <QUndoStack>

#include <algorithm>

namespace splitseg::ui {

Session::Session(QObject* parent) : QObject(parent), undo_(new QUndoStack(this)) {
  for (const auto& d : engine::detectDevices()) devices_.push_back(d);
  // The workstation's starting run: a short run on the open volume, validated as it goes.
  run_.data.kind = run::DataKind::Volume;
  run_.batch = 2;
  run_.steps = 200;
  run_.validateEvery = 10;
  // Review's starting window: a 96³ sliding window (the CLI's default is the whole volume).
  run_.window = {96, 96, 96};
}

Session::~Session() = default;

void Session::setImage(std::shared_ptr<const Volume> image, const QString& source) {
  image_ = std::move(image);
  imageSource_ = source;
  // A label or prediction of another grid would overlay wrongly.
  if (groundTruth_ && image_ && !groundTruth_->geometry().sameGrid(image_->geometry())) groundTruth_.reset();
  prediction_.reset();
  Q_EMIT imageChanged();
  Q_EMIT groundTruthChanged();
  Q_EMIT predictionChanged();
}

void Session::setGroundTruth(std::shared_ptr<const Volume> label, const QString& source) {
  groundTruth_ = std::move(label);
  groundTruthSource_ = source;
  Q_EMIT groundTruthChanged();
}

void Session::setPrediction(std::shared_ptr<const Volume> prediction) {
  prediction_ = std::move(prediction);
  Q_EMIT predictionChanged();
}

void Session::setNetwork(std::shared_ptr<model::StagedNetwork> network) {
  network_ = std::move(network);
  stages_.clear();
  structure_.reset();
  if (network_) {
    try {
      structure_ = std::make_shared<planner::NetworkStructure>(model::networkStructure(*network_));
    } catch (const std::exception& e) {
      Q_EMIT message(tr("Memory planner unavailable for this network: %1").arg(e.what()));
    }
    const auto specs = network_->stageSpecs();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      StageInfo s;
      s.name = specs[i].name;
      s.inputs = specs[i].inputs;
      s.inChannels = specs[i].inChannels;
      s.outChannels = specs[i].outChannels;
      s.level = specs[i].level;
      s.parameters = network_->stageParameterCount(i);
      stages_.push_back(s);
    }
  }
  // Keep what the old placement said for stages that still exist; the rest go where most are.
  const auto names = stageNames();
  auto next = placement::Placement::uniform(names, defaultDevice());
  for (const auto& n : names)
    if (std::find(placement_.stages().begin(), placement_.stages().end(), n) != placement_.stages().end())
      next.assign(n, placement_.entryOf(n));
  placement_ = next;
  run_.setPlacement(placement_);
  // The run describes this network; per-stage settings of stages it lacks go.
  if (network_) {
    run_.architecture = network_->architecture();
    run_.networkOptions = nlohmann::json::parse(network_->optionsJson());
  }
  for (auto it = run_.precision.stages.begin(); it != run_.precision.stages.end();)
    it = std::find(names.begin(), names.end(), it->first) == names.end() ? run_.precision.stages.erase(it) : std::next(it);
  for (auto it = run_.recompute.begin(); it != run_.recompute.end();)
    it = std::find(names.begin(), names.end(), *it) == names.end() ? run_.recompute.erase(it) : std::next(it);
  undo_->clear();
  // Speeds were measured with the previous network.
  const bool hadSpeeds = !speeds_.empty();
  speeds_.clear();
  Q_EMIT networkChanged();
  if (hadSpeeds) Q_EMIT speedsChanged();
  Q_EMIT placementChanged();
  Q_EMIT runChanged();
}

void Session::createNetwork(const std::string& architecture, const nlohmann::json& options) {
  setNetwork(engine::createNetwork(architecture, options.dump()));
}

void Session::createUNet(int baseChannels, int depth, int inChannels, int outChannels) {
  createNetwork("unet3d", {{"base_channels", baseChannels}, {"depth", depth}, {"in_channels", inChannels},
                           {"out_channels", outChannels}});
}

std::vector<std::string> Session::stageNames() const {
  std::vector<std::string> out;
  for (const auto& s : stages_) out.push_back(s.name);
  return out;
}

const std::string& Session::runSecret() const {
  static const std::string secret = ranks::makeRunSecret();
  return secret;
}

const StageInfo* Session::stage(const std::string& name) const {
  for (const auto& s : stages_)
    if (s.name == name) return &s;
  return nullptr;
}

const engine::DeviceInfo* Session::device(const std::string& name) const {
  for (const auto& d : devices_)
    if (d.name == name) return &d;
  return nullptr;
}

void Session::setMeasuredSpeeds(std::map<std::string, engine::MeasuredSpeed> speeds) {
  speeds_ = std::move(speeds);
  Q_EMIT speedsChanged();
}

const engine::MeasuredSpeed* Session::measuredSpeed(const std::string& device) const {
  const auto it = speeds_.find(placement::splitRank(device).device);
  return it == speeds_.end() ? nullptr : &it->second;
}

void Session::setDevices(const QVector<engine::DeviceInfo>& devices) {
  // The ranks' columns stay: they are not this process's devices.
  QVector<engine::DeviceInfo> ranks;
  for (const auto& d : devices_)
    if (placement::splitRank(d.name).rank >= 0) ranks.push_back(d);
  devices_ = devices;
  devices_ += ranks;
  Q_EMIT devicesChanged();
}

std::string Session::addRank(RankHost host) {
  if (host.rank < 1 || std::any_of(hosts_.begin(), hosts_.end(), [&](const auto& h) { return h.rank == host.rank; })) {
    host.rank = 1;
    for (const auto& h : hosts_) host.rank = std::max(host.rank, h.rank + 1);
  }
  if (host.rank > kMaxRanks) throw InvalidArgument("at most " + std::to_string(kMaxRanks) + " ranks");
  host.device = placement::canonicalDevice(host.device);
  engine::DeviceInfo d;
  if (host.local()) {
    const auto* here = device(host.device);
    if (!here || here->planningOnly)
      throw InvalidArgument("this machine has no " + host.device + " for a local rank to run on");
    d = *here;
    host.totalBytes = here->totalBytes;
    d.description = "rank " + std::to_string(host.rank) + " · this machine · " + here->description;
  } else {
    d.description = "rank " + std::to_string(host.rank) + " · " + host.host + " (declared)";
    d.totalBytes = d.freeBytes = host.totalBytes;
  }
  d.name = host.deviceName();
  hosts_.push_back(host);
  devices_.push_back(d);
  Q_EMIT devicesChanged();
  return d.name;
}

void Session::removeRank(int rank) {
  const auto it = std::find_if(hosts_.begin(), hosts_.end(), [&](const auto& h) { return h.rank == rank; });
  if (it == hosts_.end()) return;
  const std::string name = it->deviceName();
  hosts_.erase(it);
  rankProblems_.remove(rank);
  devices_.erase(std::remove_if(devices_.begin(), devices_.end(), [&](const auto& d) { return d.name == name; }),
                 devices_.end());
  releaseDevice(name);
}

void Session::setHosts(const std::vector<RankHost>& hosts) {
  while (!hosts_.empty()) removeRank(hosts_.back().rank);
  for (const auto& h : hosts) addRank(h);
}

void Session::setRankProblem(int rank, const QString& problem) {
  if (rankProblems_.value(rank) == problem) return;
  if (problem.isEmpty())
    rankProblems_.remove(rank);
  else
    rankProblems_[rank] = problem;
  Q_EMIT rankProblemsChanged();
}

void Session::clearRankProblems() {
  if (rankProblems_.isEmpty()) return;
  rankProblems_.clear();
  Q_EMIT rankProblemsChanged();
}

std::string Session::addPlanningDevice(std::int64_t totalBytes) {
  // Named as the next CUDA device so placements, the planner and the CLI accept it; the
  // planningOnly flag keeps every run off it.
  int cuda = 0;
  for (const auto& x : devices_) cuda += x.name.rfind("cuda:", 0) == 0;
  engine::DeviceInfo d;
  d.name = "cuda:" + std::to_string(cuda);
  ++planningCount_;
  d.description = "planning-only GPU";
  d.totalBytes = totalBytes;
  d.freeBytes = totalBytes;
  d.planningOnly = true;
  devices_.push_back(d);
  Q_EMIT devicesChanged();
  return d.name;
}

void Session::removePlanningDevice(const std::string& name) {
  const auto it = std::find_if(devices_.begin(), devices_.end(),
                               [&](const auto& d) { return d.name == name && d.planningOnly; });
  if (it == devices_.end()) return;
  devices_.erase(it);
  releaseDevice(name);
}

void Session::releaseDevice(const std::string& name) {
  // Stages left on the removed device go back to the first runnable one.
  auto p = placement_;
  for (const auto& s : p.stages()) {
    // A sharded stage loses that slab; a stage left without a device goes to the default one.
    auto shards = p.shardsOf(s);
    shards.erase(std::remove(shards.begin(), shards.end(), name), shards.end());
    std::string entry;
    for (const auto& d : shards) entry += (entry.empty() ? "" : "+") + d;
    p.assign(s, entry.empty() ? defaultDevice() : entry);
  }
  placement_ = p;
  run_.setPlacement(placement_);
  Q_EMIT devicesChanged();
  Q_EMIT placementChanged();
  Q_EMIT runChanged();
}

std::set<int> Session::remoteRanks() const {
  std::set<int> out;
  for (const auto& h : hosts_)
    if (!h.local()) out.insert(h.rank);
  return out;
}

const engine::DeviceInfo* Session::planningOnlyPlacement(std::string* stage) const {
  for (const auto& st : placement_.stages())
    for (const auto& shard : placement_.shardsOf(st))
      if (const auto* d = device(shard); d && d->planningOnly) {
        if (stage) *stage = st;
        return d;
      }
  return nullptr;
}

std::vector<std::string> Session::runnableDevices() const {
  std::vector<std::string> out;
  // GPUs first: the default placement should use an accelerator when there is one.
  // Ranks' devices last: stages stay in this process unless placed on a rank.
  auto ranked = [](const engine::DeviceInfo& d) { return placement::splitRank(d.name).rank >= 0; };
  for (const auto& d : devices_)
    if (!d.planningOnly && d.name != "cpu" && !ranked(d)) out.push_back(d.name);
  for (const auto& d : devices_)
    if (!d.planningOnly && d.name == "cpu") out.push_back(d.name);
  for (const auto& d : devices_)
    if (!d.planningOnly && ranked(d)) out.push_back(d.name);
  return out;
}

void Session::setPlacement(const placement::Placement& placement) {
  if (placement == placement_) return;
  placement_ = placement;
  run_.setPlacement(placement_);
  Q_EMIT placementChanged();
  Q_EMIT runChanged();
}

std::string Session::defaultDevice() const {
  const auto runnable = runnableDevices();
  return runnable.empty() ? "cpu" : runnable.front();
}

void Session::setRun(const run::RunSpec& in) {
  run::RunSpec run = in;
  // The network is the session's own (setNetwork): the run describes it, not another one.
  if (network_) {
    run.architecture = run_.architecture;
    run.networkOptions = run_.networkOptions;
  }
  if (run == run_) return;
  const bool placementChanged = run.placement != run_.placement;
  // Speeds were measured in the old precisions.
  const bool precisionChanged =
      run.precision.fallback != run_.precision.fallback || run.precision.stages != run_.precision.stages;
  run_ = run;
  if (precisionChanged && !speeds_.empty()) {
    speeds_.clear();
    Q_EMIT speedsChanged();
  }
  if (placementChanged && !stages_.isEmpty()) {
    try {
      placement_ = run_.resolvePlacement(stageNames(), defaultDevice());
    } catch (const std::exception& e) {
      Q_EMIT message(tr("placement not applied: %1").arg(e.what()));
    }
    run_.setPlacement(placement_);
    Q_EMIT this->placementChanged();
  }
  Q_EMIT runChanged();
}

void Session::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  Q_EMIT busyChanged(busy);
}

} // namespace splitseg::ui
