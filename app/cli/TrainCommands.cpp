#include "app/cli/CliSupport.h"
#include "app/cli/DistTraining.h"
#include "app/cli/Commands.h"
#include "app/cli/RunOptions.h"
#include "core/data/Phantom.h"
#include "core/plugin/PluginRegistry.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/Devices.h"
#include "core/engine/PlannedPeaks.h"
#include "core/engine/PlannerDevices.h"
#include "core/engine/Trainer.h"
#include "core/model/NetworkStructureOf.h"
#include "core/placement/AutoPlacer.h"

#ifdef SPLITSEG_WITH_ITK
#include "core/dataset/DatasetSource.h"
#endif

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {

// After an out-of-memory step: what the planner would do instead on these devices.
std::string planSuggestion(model::StagedNetwork& net, const run::RunSpec& spec) {
  try {
    auto req = spec.planRequest(net.stageNames(), engine::plannerDevices());  // the CPU budget as its capacity
    req.placement = {};
    placement::MemoryPlanner planner(model::networkStructure(net));
    auto best = placement::AutoPlacer(planner).place(req);
    if (best.plan.fits) return "the planner suggests --placement " + best.placement.toInline();
    return "no placement of this network fits these devices at this size (limit: stage " + best.plan.limitingStage +
           " on " + best.plan.limitingDevice + "); try --precision bf16, --recompute all or a smaller patch";
  } catch (const std::exception& e) {
    return std::string("(no plan: ") + e.what() + ")";
  }
}

struct TrainArgs {
  RunOptions run;
  std::string resume;
  std::string progress = "bar";
};

void runTrain(const TrainArgs& a) {
  // Started by torchrun (or srun) as a rank other than 0: the run comes from rank 0.
  const auto env = dist::RankEnv::fromEnvironment();
  if (env.rank > 0) {
    runAsWorker(env, rankTimeout(a.run.build().rankTimeoutSeconds, a.run.given("--rank-timeout")));
    return;
  }
  // The run: defaults, or the checkpoint being resumed, or the session; then the typed flags.
  run::RunSpec base;
  if (!a.resume.empty()) base = engine::readCheckpointInfo(a.resume).run;
  run::RunSpec spec = a.run.build(base);
  if (a.run.printRun()) {
    std::cout << spec.toJson().dump(2) << "\n";
    return;
  }
  // A run from flags alone names its data (the synthetic default is for sessions and the GUI).
  if (a.resume.empty() && a.run.sessionPath().empty() && !a.run.given("--synthetic") && !a.run.given("--dataset") &&
      !a.run.given("--image"))
    throw InvalidArgument("give training data: --synthetic SIZE, --dataset DIR, or --image FILE --label FILE");
  // `launch --rank-timeout` reaches every rank through the environment.
  spec.rankTimeoutSeconds = rankTimeout(spec.rankTimeoutSeconds, a.run.given("--rank-timeout"));
  if (!env.distributed() && dropRanks(spec))
    std::cerr << "note: the placement names ranks; this is one process, so each stage runs on its device here\n";
  spec.check(engine::runnableDeviceNames());  // a bad run stops here, before data or network are built
  std::shared_ptr<data::SampleSource> source;
  switch (spec.data.kind) {
    case run::DataKind::Synthetic: {
      const auto out = spec.networkOptions.value("out_channels", 1);
      source = std::make_shared<data::PhantomSource>(out <= 1 ? 1 : out - 1);
      break;
    }
    case run::DataKind::Dataset:
    case run::DataKind::Pairs: {
#ifdef SPLITSEG_WITH_ITK
      auto ds = spec.data.kind == run::DataKind::Pairs ? dataset::datasetFromPairs({{spec.data.image, spec.data.label}})
                                                         : dataset::openDataset(spec.data.dataset);
      dataset::DatasetSourceOptions so;
      so.preprocessing = spec.preprocessing;
      so.validationFraction = ds.cases.size() < 2 ? 0.0 : spec.data.validationFraction;  // one case trains on itself
      auto dsrc = std::make_shared<dataset::DatasetSource>(ds, so);
      spec.networkOptions["in_channels"] = dsrc->channelCount();
      const auto classes = dsrc->foregroundClasses();
      spec.networkOptions["out_channels"] = classes == 1 ? 1 : classes + 1;
      source = dsrc;
      break;
#else
      throw InvalidArgument("this build has no image IO (built without ITK): use --synthetic SIZE");
#endif
    }
    default:
      throw InvalidArgument("give training data: --synthetic SIZE, --dataset DIR, or --image FILE --label FILE");
  }
  torch::manual_seed(spec.seed);  // --seed fixes the initial weights too
  auto net = plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
  a.run.applyStages(spec, net->stageNames());
  spec.check(engine::runnableDeviceNames(), net->stageNames());

  // The planner's peak per device (per rank over ranks), printed beside each step's measured one.
  std::map<std::string, std::int64_t> planned;
  std::string planNote;
  try {
    planned = engine::plannedStepPeaks(*net, spec);
  } catch (const std::exception& e) {
    planNote = e.what();
  }
  if (env.distributed()) {
    trainAsRankZero(env, spec, net, source, a.resume, a.progress, planned, planNote);
    return;
  }
  engine::Trainer trainer(net, source, spec);
  if (!a.resume.empty()) trainer.loadCheckpoint(a.resume);
  CliMetrics metrics(a.progress, planned, planNote);
  if (a.progress == "bar")
    std::cerr << net->architecture() << " " << net->optionsJson() << " (" << net->parameterCount()
              << " parameters) on " << trainer.placement().describe() << "\n";
  try {
    trainer.run(&metrics);
  } catch (const OutOfMemoryError& e) {
    // Model, optimizer and the last checkpoint are intact; say what would fit.
    throw OutOfMemoryError(e.device(), e.stage(),
                           std::string("step ") + std::to_string(trainer.stepsDone() + 1) + " abandoned; " +
                               planSuggestion(*net, trainer.spec()));
  }
}
} // namespace

void addTrainCommands(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "train the split U-Net");
  a->run.addNetwork(*cmd);
  a->run.addData(*cmd);
  a->run.addShape(*cmd);
  a->run.addExecution(*cmd);
  a->run.addSchedule(*cmd);
  a->run.addSession(*cmd);
  cmd->add_option("--resume", a->resume, "continue from this checkpoint (its run, overlaid by the flags given)");
  cmd->add_option("--progress", a->progress, "jsonl|bar|none")->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "bar", "none"}));
  cmd->callback([a] { runTrain(*a); });
}

} // namespace splitseg::cli
