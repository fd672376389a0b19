#include "core/ranks/RankRun.h"

#include "core/ranks/Comm.h"
#include "core/ranks/ExecutionMode.h"
#include "core/ranks/PipelineInferer.h"
#include "core/ranks/PipelineTrainer.h"
#include "core/ranks/RankTrainingMode.h"
#include "core/ranks/SpatialInferer.h"
#include "core/ranks/SpatialTrainer.h"
#include "core/engine/Devices.h"
#include "core/engine/Inferer.h"
#include "core/placement/Placement.h"
#include "core/base/JsonText.h"
#include "core/plugin/PluginRegistry.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <thread>

namespace splitseg::ranks {

namespace {
std::chrono::milliseconds seconds(int s) { return std::chrono::milliseconds(std::int64_t(s) * 1000); }

// Rank 0 predicts through the ranks; the others serve (PipelineInferer or SpatialInferer).
template <class RankInferer>
DevicePeaks predictOnRanks(Comm& comm, std::shared_ptr<model::StagedNetwork> net, const run::RunSpec& spec,
                           const std::function<void(engine::Inferer&)>& use) {
  RankInferer ranks(comm, std::move(net), spec);
  if (comm.rank() != 0) {
    ranks.serve();
    return {};
  }
  engine::Inferer inferer(ranks);
  try {
    use(inferer);
  } catch (...) {
    // Between passes (Cancel between windows, a window refused before its pass) the others wait
    // for rank 0's next windows: "none" lets them go at once. Mid-pass (a rank lost, out of
    // memory in a stage) they are waiting inside the pass and stop when rank 0's connection
    // closes. The first exception is the one that says why.
    if (ranks.betweenPasses()) {
      try {
        ranks.finish();
      } catch (const std::exception&) {
      }
    }
    throw;
  }
  ranks.finish();
  return ranks.rankPeaks();
}

bool everyStageSharded(const run::RunSpec& spec, const model::StagedNetwork& net, int worldSize) {
  return executionModeOf(spec, net.stageNames(), worldSize) == ExecutionMode::Sharded;
}

// Every rank the same: the trainer of the run's mode, resumed from rank 0's checkpoint (`resume`
// is read on rank 0 only; the others take their part from it), trained by the one loop.
template <class RankTrainer>
void trainOnRanks(Comm& comm, std::shared_ptr<model::StagedNetwork> net, std::shared_ptr<data::SampleSource> source,
                  const run::RunSpec& spec, bool resume, const std::string& resumePath, engine::MetricsSink* sink,
                  CancelToken* cancel, const std::function<void(const std::string&)>& describe, const std::string& line,
                  const checkpoint::CheckpointFile* resumeFile = nullptr) {
  RankTrainer trainer(comm, std::move(net), std::move(source), spec);
  if (resume) trainer.loadCheckpoint(resumePath, resumeFile);
  if (describe) describe(comm.linkSummary().empty() ? line : line + "; " + comm.linkSummary());
  trainer.run(sink, cancel);
}
} // namespace

std::string rankIdentity() { return std::string("SplitSeg ") + SPLITSEG_VERSION + ", LibTorch " + TORCH_VERSION; }

std::string rankProblem(const run::RunSpec& spec, const std::vector<std::string>& stages, int rank, int worldSize) {
  try {
    const auto p = spec.resolvePlacement(stages, "cpu");
    const auto here = engine::runnableDeviceNames();
    if (executionModeOf(p, worldSize) == ExecutionMode::Sharded) {  // every stage on every rank: this rank's slab device
      for (const auto& d : placement::splitShards(p.entryOf(stages.front()))) {
        const auto rd = placement::splitRank(d);
        if (rd.rank == rank && std::find(here.begin(), here.end(), rd.device) == here.end())
          return "this rank's slabs are placed on " + rd.device + ", which its machine lacks";
      }
      return "";
    }
    const auto owners = stageOwners(p, worldSize);
    for (std::size_t i = 0; i < stages.size(); ++i) {
      if (owners[i] != rank) continue;
      const auto d = placement::splitRank(p.deviceOf(stages[i])).device;
      if (std::find(here.begin(), here.end(), d) == here.end()) {
        std::string list;
        for (const auto& h : here) list += (list.empty() ? "" : ", ") + h;
        return "stage " + stages[i] + " is placed on " + d + ", which this rank's machine lacks (it has " + list + ")";
      }
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool dropRanks(run::RunSpec& spec) {
  bool changed = false;
  for (auto& [stage, device] : spec.placement) {
    // Each shard's device in this process; shards that land on the same device become one.
    std::vector<std::string> local;
    bool ranked = false;
    for (const auto& shard : placement::splitShards(device)) {
      const auto rd = placement::splitRank(shard);
      ranked = ranked || rd.rank >= 0;
      if (std::find(local.begin(), local.end(), rd.device) == local.end()) local.push_back(rd.device);
    }
    if (!ranked) continue;
    std::string entry;
    for (const auto& d : local) entry += (entry.empty() ? "" : "+") + d;
    device = entry;
    changed = true;
  }
  return changed;
}

namespace {
// Rank 0 computes with the threads every rank on this host gets (engine::rankThreads of the ranks
// on this host, not of ranks on other machines; `launch` gives them through OMP_NUM_THREADS), as the
// planner plans it (engine::setRankThreads): with the workstation's own thread count rank 0 took
// the cores its local workers compute on (docs/calibration.md). Restored after the run.
struct RankZeroThreads {
  explicit RankZeroThreads(const RankEnv& env) : before(at::get_num_threads()) {
    at::set_num_threads(engine::rankThreads(env.ranksOnThisHost()));
  }
  ~RankZeroThreads() { at::set_num_threads(before); }
  int before;
};
} // namespace

void trainAsRankZero(const RankEnv& env, run::RunSpec spec, std::shared_ptr<model::StagedNetwork> net,
                     std::shared_ptr<data::SampleSource> source, const std::string& resume, engine::MetricsSink* sink,
                     CancelToken* cancel, const std::function<void(const std::string&)>& describe,
                     const checkpoint::CheckpointFile* resumeFile) {
  const RankZeroThreads threads(env);
  Comm comm(env, rankIdentity(), seconds(spec.rankTimeoutSeconds), cancel);
  comm.publish("run", nlohmann::json{{"run", spec.toJson()}, {"mode", "train"}, {"resume", !resume.empty()}}.dump());
  comm.agree("ready", rankProblem(spec, net->stageNames(), 0, env.worldSize));
  comm.startGroup(seconds(spec.rankTimeoutSeconds));
  const bool resuming = !resume.empty();
  if (everyStageSharded(spec, *net, env.worldSize)) {
    trainOnRanks<SpatialTrainer>(comm, net, source, spec, resuming, resume, sink, cancel, describe,
                                 net->architecture() + " (" + std::to_string(net->parameterCount()) +
                                     " parameters), every stage sharded over " + std::to_string(env.worldSize) + " ranks",
                                 resumeFile);
    return;
  }
  trainOnRanks<PipelineTrainer>(comm, net, source, spec, resuming, resume, sink, cancel, describe,
                                net->architecture() + " " + net->optionsJson() + " (" +
                                    std::to_string(net->parameterCount()) + " parameters) on " +
                                    std::to_string(env.worldSize) + " ranks, " + std::to_string(spec.microBatches) +
                                    " micro-batches",
                                resumeFile);
}

DevicePeaks inferAsRankZero(const RankEnv& env, const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net,
                            const std::function<void(engine::Inferer&)>& use, CancelToken* cancel) {
  const RankZeroThreads threads(env);
  Comm comm(env, rankIdentity(), seconds(spec.rankTimeoutSeconds), cancel);
  comm.publish("run", nlohmann::json{{"run", spec.toJson()}, {"mode", "infer"}}.dump());
  comm.agree("ready", rankProblem(spec, net->stageNames(), 0, env.worldSize));
  comm.startGroup(seconds(spec.rankTimeoutSeconds));
  if (everyStageSharded(spec, *net, env.worldSize)) return predictOnRanks<SpatialInferer>(comm, net, spec, use);
  return predictOnRanks<PipelineInferer>(comm, net, spec, use);
}

void serveInference(Comm& comm, std::shared_ptr<model::StagedNetwork> net, const run::RunSpec& spec) {
  if (everyStageSharded(spec, *net, comm.size()))
    predictOnRanks<SpatialInferer>(comm, net, spec, {});
  else
    predictOnRanks<PipelineInferer>(comm, net, spec, {});
}

void serveAsWorker(const RankEnv& env, int timeoutSeconds) {
  Comm comm(env, rankIdentity(), seconds(timeoutSeconds));
  nlohmann::json message = nlohmann::json::object();
  std::string problem;
  run::RunSpec spec;
  std::shared_ptr<model::StagedNetwork> net;
  try {
    message = parseJson(comm.fetch("run"), "rank 0's run message", kRankMessageLimits);
    if (!message.is_object() || !message.contains("run")) throw FormatError("rank 0", "an unreadable run description");
    spec = run::RunSpec::fromJson(message.at("run"));
    torch::manual_seed(spec.seed);
    net = plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
    problem = rankProblem(spec, net->stageNames(), env.rank, env.worldSize);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  comm.agree("ready", problem);  // throws on every rank when one has a problem
  comm.startGroup(seconds(spec.rankTimeoutSeconds));
  if (message.value("mode", std::string("train")) == "infer") {
    serveInference(comm, net, spec);
    return;
  }
  const bool resume = message.value("resume", false);
  if (everyStageSharded(spec, *net, env.worldSize))
    trainOnRanks<SpatialTrainer>(comm, net, nullptr, spec, resume, "", nullptr, nullptr, {}, "");
  else
    trainOnRanks<PipelineTrainer>(comm, net, nullptr, spec, resume, "", nullptr, nullptr, {}, "");
}

} // namespace splitseg::ranks

namespace splitseg::ranks {

// Above every other tag in use: pipeline messages (kind << 24, kinds 0..6) and the spatial
// trainer's (below 1 << 25).
int stepControlTag() { return (8 << 24) + 1; }
int lossOutcomeTag() { return (8 << 24) + 2; }

void agreeLossIsFinite(Comm& comm, int lossRank, std::int64_t step, double value, int micro) {
  double outcome[2] = {value, static_cast<double>(micro)};
  if (comm.rank() == lossRank) {
    const auto t = torch::tensor({outcome[0], outcome[1]}, torch::kDouble);
    for (int r = 0; r < comm.size(); ++r)
      if (r != lossRank) comm.send(t, r, lossOutcomeTag(), "whether the step's loss was finite");
    comm.flush();
  } else {
    const auto t = comm.recv(lossRank, lossOutcomeTag(), "whether the step's loss was finite");
    if (t.scalar_type() != torch::kDouble || t.numel() != 2)
      throw RankError("rank " + std::to_string(lossRank) + " sent a malformed step outcome");
    outcome[0] = t[0].item<double>();
    outcome[1] = t[1].item<double>();
  }
  if (!std::isfinite(outcome[0]))
    throw engine::NonFiniteLoss(engine::nonFiniteLossMessage(step, outcome[0], static_cast<int>(outcome[1])));
}

void RankTrainingMode::outOfMemory(const c10::OutOfMemoryError& e, const std::string& what) {
  rethrowOutOfMemory(e, comm_.rank(), working_.empty() ? what : working_);
}

bool nextStep(Comm& comm, CancelToken* cancel) {
  auto tell = [&](StepControl c) {
    for (int r = 1; r < comm.size(); ++r)
      comm.send(torch::full({1}, static_cast<std::int64_t>(c), torch::kLong), r, stepControlTag(), "the next step");
    comm.flush();
  };
  if (comm.rank() != 0) {
    while (true) {
      const auto c = static_cast<StepControl>(comm.recv(0, stepControlTag(), "rank 0's next step").item<std::int64_t>());
      if (c != StepControl::Paused) return c == StepControl::Step;
    }
  }
  if (cancel) {
    while (cancel->paused() && !cancel->cancelled()) {
      tell(StepControl::Paused);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (cancel->cancelled()) {
      tell(StepControl::Stop);
      return false;
    }
  }
  tell(StepControl::Step);
  return true;
}

} // namespace splitseg::ranks
