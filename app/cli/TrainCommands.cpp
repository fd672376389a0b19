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
#include "core/engine/Trainer.h"
#include "core/checkpoint/CheckpointFile.h"
#include "core/launch/RunLauncher.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {

struct TrainArgs {
  RunOptions run;
  std::string resume;
  std::string progress = "bar";
};

void runTrain(const TrainArgs& a) {
  // Started by torchrun (or srun) as a rank other than 0: the run comes from rank 0.
  const auto env = ranks::RankEnv::fromEnvironment();
  if (env.rank > 0) {
    runAsWorker(env, rankTimeout(a.run.build().rankTimeoutSeconds, a.run.given("--rank-timeout")));
    return;
  }
  // The run: defaults, or the checkpoint being resumed, or the session; then the typed flags.
  run::RunSpec base;
  std::shared_ptr<const checkpoint::CheckpointFile> resumed;  // read once: the run's base and the trainer's state
  if (!a.resume.empty()) {
    resumed = launch::checkpointToResume(a.resume);
    base = resumed->info.run;
  }
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
  auto source = launch::sampleSourceFor(spec);  // a dataset's channels and classes go into the network
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
  CliMetrics metrics(a.progress, planned, planNote);
  launch::Launch how;
  how.ranks = env;
  how.resume = a.resume;
  how.resumeFile = resumed;
  how.sink = &metrics;
  if (a.progress != "none") how.describe = [](const std::string& line) { std::cerr << line << "\n"; };
  launch::train(spec, net, source, how);
}
} // namespace

void addTrainCommands(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "train the split U-Net");
  a->run.addNetwork(*cmd);
  a->run.addData(*cmd);
  a->run.addShape(*cmd);
  a->run.addExecution(*cmd);
  addRankNetworkOptions(*cmd);
  a->run.addSchedule(*cmd);
  a->run.addSession(*cmd);
  cmd->add_option("--resume", a->resume, "continue from this checkpoint (its run, overlaid by the flags given)");
  cmd->add_option("--progress", a->progress, "jsonl|bar|none")->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "bar", "none"}));
  cmd->callback([a] { runTrain(*a); });
}

} // namespace splitseg::cli
