#include "core/dist/RankRun.h"

#include "core/dist/Comm.h"
#include "core/dist/PipelineInferer.h"
#include "core/dist/PipelineTrainer.h"
#include "core/dist/RunLoop.h"
#include "core/dist/SpatialInferer.h"
#include "core/dist/SpatialTrainer.h"
#include "core/engine/Devices.h"
#include "core/engine/Inferer.h"
#include "core/placement/Placement.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace splitseg::dist {

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
  return SpatialTrainer::applies(spec.resolvePlacement(net.stageNames(), "cpu"), worldSize);
}
} // namespace

std::string rankIdentity() { return std::string("SplitSeg ") + SPLITSEG_VERSION + ", LibTorch " + TORCH_VERSION; }

std::string rankProblem(const run::RunSpec& spec, const std::vector<std::string>& stages, int rank, int worldSize) {
  try {
    const auto p = spec.resolvePlacement(stages, "cpu");
    const auto here = engine::runnableDeviceNames();
    if (SpatialTrainer::applies(p, worldSize)) {  // every stage on every rank: this rank's slab device
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
// planner plans it (engine::setRankThreads). With the
// workstation's own thread count a pipeline's rank 0 on two threads measured 12% over its plan
// (2026-12-05, base 4) and took the cores its local workers compute on. Restored after the run.
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
                     CancelToken* cancel, const std::function<void(const std::string&)>& describe) {
  const RankZeroThreads threads(env);
  Comm comm(env, rankIdentity(), seconds(spec.rankTimeoutSeconds), cancel);
  comm.publish("run", nlohmann::json{{"run", spec.toJson()}, {"mode", "train"}, {"resume", !resume.empty()}}.dump());
  comm.agree("ready", rankProblem(spec, net->stageNames(), 0, env.worldSize));
  comm.startGroup(seconds(spec.rankTimeoutSeconds));
  if (SpatialTrainer::applies(spec.resolvePlacement(net->stageNames(), "cpu"), env.worldSize)) {
    SpatialTrainer trainer(comm, net, source, spec);
    if (!resume.empty()) trainer.loadCheckpoint(resume);
    if (describe)
      describe(net->architecture() + " (" + std::to_string(net->parameterCount()) + " parameters), every stage sharded over " +
               std::to_string(env.worldSize) + " ranks");
    trainer.run(sink, cancel);
    return;
  }
  PipelineTrainer trainer(comm, net, source, spec);
  if (!resume.empty()) trainer.loadCheckpoint(resume);
  if (describe)
    describe(net->architecture() + " " + net->optionsJson() + " (" + std::to_string(net->parameterCount()) +
             " parameters) on " + std::to_string(env.worldSize) + " ranks, " + std::to_string(spec.microBatches) +
             " micro-batches");
  trainer.run(sink, cancel);
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

} // namespace splitseg::dist

namespace splitseg::dist {

// Above every other tag in use: pipeline messages (kind << 24, kinds 0..6) and the spatial
// trainer's (below 1 << 25).
int stepControlTag() { return (8 << 24) + 1; }

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

} // namespace splitseg::dist
