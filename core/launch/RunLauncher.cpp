#include "core/launch/RunLauncher.h"

#include "core/base/Error.h"
#include "core/checkpoint/CheckpointFile.h"
#include "core/engine/Devices.h"
#include "core/engine/Inferer.h"
#include "core/engine/PlannerDevices.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/Trainer.h"
#include "core/model/NetworkStructureOf.h"
#include "core/planner/AutoPlacer.h"
#include "core/planner/MemoryPlanner.h"
#include "core/ranks/RankRun.h"
#ifdef SPLITSEG_WITH_ITK
#include "core/dataset/Dataset.h"
#include "core/dataset/DatasetSource.h"
#endif

#include <torch/torch.h>

#include <algorithm>

namespace splitseg::launch {

std::shared_ptr<const checkpoint::CheckpointFile> checkpointToResume(const std::string& path) {
  return std::make_shared<const checkpoint::CheckpointFile>(checkpoint::CheckpointFile::read(path));
}

ranks::ExecutionMode modeOf(const run::RunSpec& spec, const model::StagedNetwork& net, const ranks::RankEnv& env) {
  return ranks::executionModeOf(spec, net.stageNames(), env.worldSize);
}

std::shared_ptr<data::SampleSource> sampleSourceFor(run::RunSpec& spec) {
  switch (spec.data.kind) {
    case run::DataKind::Synthetic: {
      const auto out = spec.networkOptions.value("out_channels", 1);
      return std::make_shared<data::PhantomSource>(out <= 1 ? 1 : out - 1);
    }
    case run::DataKind::Dataset:
    case run::DataKind::Pairs: {
#ifdef SPLITSEG_WITH_ITK
      auto ds = spec.data.kind == run::DataKind::Pairs ? dataset::datasetFromPairs({{spec.data.image, spec.data.label}})
                                                         : dataset::openDataset(spec.data.dataset);
      dataset::DatasetSourceOptions so;
      so.preprocessing = spec.preprocessing;
      so.validationFraction = ds.cases.size() < 2 ? 0.0 : spec.data.validationFraction;  // one case trains on itself
      auto source = std::make_shared<dataset::DatasetSource>(ds, so);
      spec.networkOptions["in_channels"] = source->channelCount();
      const auto classes = source->foregroundClasses();
      spec.networkOptions["out_channels"] = classes == 1 ? 1 : classes + 1;
      return source;
#else
      throw InvalidArgument("this build has no image IO (built without ITK): use --synthetic SIZE");
#endif
    }
    default:
      throw InvalidArgument("give training data: --synthetic SIZE, --dataset DIR, or --image FILE --label FILE");
  }
}

std::string planSuggestion(model::StagedNetwork& net, const run::RunSpec& spec) {
  try {
    auto req = spec.planRequest(net.stageNames(), engine::plannerDevices());  // the CPU budget as its capacity
    req.placement = {};
    planner::MemoryPlanner planner(model::networkStructure(net));
    auto best = planner::AutoPlacer(planner).place(req);
    if (best.plan.fits) return "the planner suggests --placement " + best.placement.toInline();
    return "no placement of this network fits these devices at this size (limit: stage " + best.plan.limitingStage +
           " on " + best.plan.limitingDevice + "); try --precision bf16, --recompute all or a smaller patch";
  } catch (const std::exception& e) {
    return std::string("(no plan: ") + e.what() + ")";
  }
}

void train(const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net, std::shared_ptr<data::SampleSource> source,
           const Launch& how) {
  if (modeOf(spec, *net, how.ranks) != ranks::ExecutionMode::OneProcess) {
    ranks::trainAsRankZero(how.ranks, spec, std::move(net), std::move(source), how.resume, how.sink, how.cancel,
                           how.describe, how.resumeFile.get());
    return;
  }
  engine::Trainer trainer(net, std::move(source), spec);
  if (!how.resume.empty()) trainer.loadCheckpoint(how.resume, how.resumeFile.get());
  if (how.describe)
    how.describe(net->architecture() + " " + net->optionsJson() + " (" + std::to_string(net->parameterCount()) +
                 " parameters) on " + trainer.placement().describe());
  try {
    trainer.run(how.sink, how.cancel);
  } catch (const OutOfMemoryError& e) {
    // Model, optimizer and the last checkpoint are intact; say what would fit.
    throw OutOfMemoryError(e.device(), e.stage(),
                           std::string("step ") + std::to_string(trainer.stepsDone() + 1) + " abandoned; " +
                               planSuggestion(*net, trainer.spec()));
  }
}

ranks::DevicePeaks infer(const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net, const InfererUse& use,
                         const Launch& how) {
  net->root().eval();
  torch::NoGradGuard noGrad;
  const bool overRanks = modeOf(spec, *net, how.ranks) != ranks::ExecutionMode::OneProcess;
  engine::InferOptions o = engine::inferOptionsOf(spec);
  if (overRanks) o.batch = std::max(1, spec.microBatches);
  // This process's stages (over ranks, rank 0's), whose CPU weights a meter counts as held.
  const auto placement = spec.resolvePlacement(net->stageNames(), engine::runnableDeviceNames().front());
  const auto local = ranks::localStages(*net, placement, overRanks);
  if (overRanks)
    return ranks::inferAsRankZero(how.ranks, spec, net, [&](engine::Inferer& inferer) { use(inferer, local, o); },
                                  how.cancel);
  engine::SplitExecutor executor(net, placement, spec.precision);
  executor.setSharding(spec.shardAxis, spec.shardSlabs);
  // CPU weights channels-last before a meter starts (it cannot see the old copies freed, and would
  // count them twice), as Inferer::predict would make them; given back after.
  executor.setCpuChannelsLast(true);
  engine::Inferer inferer(executor);
  try {
    use(inferer, local, o);
  } catch (...) {
    executor.setCpuChannelsLast(false);
    throw;
  }
  executor.setCpuChannelsLast(false);
  return {};
}

} // namespace splitseg::launch
