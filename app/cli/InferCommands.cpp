#include "app/cli/CliSupport.h"
#include "app/cli/DistTraining.h"
#include "app/cli/Commands.h"
#include "app/cli/InferSupport.h"
#include "app/cli/RunOptions.h"
#include "core/plugin/PluginRegistry.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/data/Phantom.h"
#include "core/ranks/RankPeaks.h"
#include "core/ranks/RankRun.h"
#include "core/launch/RunLauncher.h"
#include "core/engine/Devices.h"
#include "core/engine/Inferer.h"
#include "core/engine/Loss.h"
#include "core/engine/Tensors.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/PlannedPeaks.h"
#include "core/engine/PlannerDevices.h"
#include "core/engine/Trainer.h"
#include "core/model/NetworkStructureOf.h"
#include "core/planner/LargestVolume.h"
#include "core/planner/MemoryPlanner.h"

#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

namespace splitseg::cli {

// The run's window, overlap and windows per pass (an inference run's batch).
engine::InferOptions inferOptions(const run::RunSpec& spec) {
  engine::InferOptions o = engine::inferOptionsOf(spec);
  o.batch = spec.batch;
  return o;
}

// The planner's tensor peak per device for this prediction (allowances excluded): placement's
// inference mode, on the devices present. A device the plan does not fit gets a note on stderr
// before the prediction starts (the run goes on: the planner may be wrong, the allocator decides).
// Over ranks the devices are the ranks' ("r1:cpu"), each taken to be like this host's.
nlohmann::json plannedPeaks(const run::RunSpec& spec, model::StagedNetwork& net, const std::array<std::int64_t, 3>& volumeZyx) {
  try {
    const auto plan = engine::plannedInference(net, spec, engine::plannerDevices(spec.resolvePlacement(net.stageNames(), "cpu")),
                                               volumeZyx, spec.batch);
    const nlohmann::json j = engine::tensorPeaks(plan);
    for (const auto& d : plan.devices) {
      if (d.capacity > 0 && !d.fits())
        std::cerr << "note: the memory planner expects " << d.name << " to need " << formatBytes(static_cast<double>(d.peak))
                  << " (peak in " << d.peakStage << "), more than its " << formatBytes(static_cast<double>(d.capacity))
                  << "; a smaller --window or fewer windows per pass (--batch) need less\n";
    }
    return j;
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}

// --window largest: the largest cubic window whose pass the planner fits on the run's devices, for
// an image of `volumeZyx` voxels as the network sees it (as Review's "Largest that fits" and
// `plan --inference --largest`). A window as large as the volume is one pass over it.
void setLargestWindow(run::RunSpec& spec, model::StagedNetwork& net, const std::array<std::int64_t, 3>& volumeZyx) {
  const planner::MemoryPlanner planner(model::networkStructure(net));
  const auto devices = engine::plannerDevices(spec.resolvePlacement(net.stageNames(), "cpu"));
  const auto request = spec.inferencePlanRequest(net.stageNames(), devices, volumeZyx, spec.batch);
  const auto lv = planner::largestWindow(planner, request);
  if (lv.edge == 0)
    throw InvalidArgument("--window largest: no window fits, not even " + std::to_string(lv.step) + "^3 (" +
                          lv.next.limitingDevice + " is the tightest device)");
  spec.window = {lv.edge, lv.edge, lv.edge};
  std::cerr << "note: --window largest: " << lv.edge << "^3"
            << (lv.edge >= planner::wholeVolumeEdge(planner, request) ? " (the whole volume in one pass)" : "") << "\n";
}

// After the summary: the command fails when a case did not finish (each has its line above).
void failIfCasesFailed(int failed) {
  if (failed > 0)
    throw IoError("--dataset", std::to_string(failed) + " case(s) could not be predicted (their lines above and summary.json say why)");
}

namespace {

// Runs the inferer with the run's window and overlap; returns seconds taken. `measured` gets each
// device's tensor peak over the prediction (ranks::PeakMeter: CUDA's allocator peak; on the CPU
// every LibTorch allocation plus the CPU parameters of `mine`, the stages this process runs) and
// the image, which existed before, as the planner counts them. `rank` >= 0 (over ranks): the
// devices are named as the planner names that rank's ("r0:cpu").
double timedPredict(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, const torch::Tensor& image,
                    engine::Prediction& prediction, const std::vector<torch::nn::Module*>& mine, int rank,
                    nlohmann::json& measured) {
  const engine::InferOptions o = inferOptions(spec);
  CliProgress progress(a.progress);
  ranks::DevicePeaks peaks;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ranks::PeakMeter meter(rank, mine, spec.cpuBudgetBytes);
    meter.holdOnCpu(image.numel() * image.element_size());
    prediction = inferer.predict(image, o, &progress);
    peaks = meter.peaks();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  measured = peaks;
  return seconds;
}


// The inference flags over the run: window, overlap, largest component, mirroring.
void overlayInferFlags(const InferArgs& a, run::RunSpec& spec) {
  if (a.window == "0") spec.window = {0, 0, 0};
  else if (!a.window.empty() && a.window != "largest") spec.window = run::parseSize(a.window);
  if (a.overlapGiven && a.overlapGiven->count() > 0) spec.overlap = a.overlap;  // else the run's
  if (a.keepLargest) {
    if (a.run.given("--synthetic")) throw InvalidArgument("--keep-largest applies to --image predictions, not --synthetic");
    spec.keepLargest = true;
  }
  if (!a.mirror.empty()) {
    try {
      spec.mirror = run::mirrorFromString(a.mirror);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--mirror: ") + e.what());
    }
  }
}

// --dataset, or --cases with the dataset the checkpoint trained on: every chosen case.
bool predictsDataset(const InferArgs& a) { return a.run.given("--dataset") || !a.cases.empty(); }

void checkInferInput(const InferArgs& a, const run::RunSpec& spec) {
  const bool synthetic = a.run.given("--synthetic");
  if (predictsDataset(a)) {
    if (synthetic || a.run.given("--image") || a.run.given("--label"))
      throw InvalidArgument("--dataset predicts the dataset's own cases: leave out --image, --label and --synthetic");
    if (spec.data.dataset.empty())
      throw InvalidArgument("--cases needs a dataset: --dataset DIR, or a checkpoint trained on one");
  } else if (!synthetic && spec.data.image.empty()) {
    throw InvalidArgument("give an input: --image FILE, --dataset DIR or --synthetic SIZE");
  }
  if (synthetic && a.run.given("--label"))
    throw InvalidArgument("--label scores an --image prediction; --synthetic phantoms are scored against their own labels");
}

// The run to predict with and its network: the checkpoint's (network, preprocessing, precision),
// or the session's; flags overlay. A checkpoint named here is read once: its network and its run
// come from that one read.
run::RunSpec inferRun(const InferArgs& a, const ranks::RankEnv& env, std::shared_ptr<model::StagedNetwork>& net) {
  run::RunSpec base;
  engine::CheckpointInfo info;
  if (!a.checkpoint.empty()) {
    net = engine::loadNetwork(a.checkpoint, &info);
    base = info.run;
  }
  run::RunSpec spec = a.run.build(base);
  overlayInferFlags(a, spec);
  const std::string checkpoint = a.checkpoint.empty() ? spec.checkpoint : a.checkpoint;
  checkInferInput(a, spec);
  if (!checkpoint.empty()) {
    if (!net) net = engine::loadNetwork(checkpoint, &info);  // the session's checkpoint
    spec.architecture = info.run.architecture;
    spec.networkOptions = info.run.networkOptions;
    if (!a.run.given("--intensity") && !a.run.given("--spacing")) spec.preprocessing = info.run.preprocessing;
  } else {
    // Untrained weights from the run's seed, as `train` and the ranks draw them: without it, four
    // runs of the same command gave four different probability maps.
    torch::manual_seed(spec.seed);
    net = plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
  }
  a.run.applyStages(spec, net->stageNames());
  // An inference run's batch is its windows per forward pass; over ranks, by default one window per
  // micro-batch, so that the ranks work on different windows at the same time.
  if (a.microGiven->count() > 0) spec.microBatches = a.microBatches;
  spec.batch = a.batchGiven->count() > 0 ? a.batch : std::max(a.batch, spec.microBatches);
  // `launch --rank-timeout` reaches every rank through the environment.
  spec.rankTimeoutSeconds = rankTimeout(spec.rankTimeoutSeconds, a.run.given("--rank-timeout"));
  if (!env.distributed() && dropRanks(spec))
    std::cerr << "note: the placement names ranks; this is one process, so each stage runs on its device here\n";
  spec.check(engine::runnableDeviceNames(), net->stageNames());
  return spec;
}

// --synthetic: a phantom predicted and scored against its own label, with the planned and
// measured memory peaks.
nlohmann::json predictPhantom(const InferArgs& a, run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                              const placement::Placement& placement, const ranks::RankEnv& env) {
  data::PhantomOptions po;
  po.size = run::parseSize(a.run.synthetic);
  po.seed = a.seed;
  po.foregroundClasses = net.outChannels() == 1 ? 1 : static_cast<int>(net.outChannels() - 1);
  auto phantom = data::makePhantom(po);
  engine::Prediction pred;
  const auto image = engine::toTensor(phantom.image).unsqueeze(0);
  if (a.window == "largest") setLargestWindow(spec, net, {image.size(1), image.size(2), image.size(3)});
  // The planner's inference peaks (before, so that its note comes first) beside the measured
  // ones; over ranks, the other ranks' measured peaks join when they are let go.
  const nlohmann::json planned = plannedPeaks(spec, net, {image.size(1), image.size(2), image.size(3)});
  nlohmann::json measured;
  const auto local = ranks::localStages(net, placement, env.distributed());
  const double seconds = timedPredict(a, spec, inferer, image, pred, local.modules, local.namedRank, measured);
  auto dice = engine::dicePerClass(pred.labels, engine::toTensor(phantom.label).round().to(torch::kLong),
                                   po.foregroundClasses);
  if (!a.probabilities.empty()) torch::save(pred.probabilities, a.probabilities);
  nlohmann::json out = {{"seconds", seconds},       {"dice", dice},
                        {"size", po.size},          {"placement", placement.describe()},
                        {"window", spec.window},    {"mirror", run::mirrorToString(spec.mirror)}};
  out["memory"] = {{"planned", planned}, {"measured", measured}};
  return out;
}

void runInfer(const InferArgs& a) {
  // Started as a rank other than 0 (torchrun): rank 0 sends the run and the windows.
  const auto env = ranks::RankEnv::fromEnvironment();
  if (env.rank > 0) {
    runAsWorker(env, rankTimeout(a.run.build().rankTimeoutSeconds, a.run.given("--rank-timeout")));
    return;
  }
  std::shared_ptr<model::StagedNetwork> net;
  run::RunSpec spec = inferRun(a, env, net);
  if (a.run.printRun()) {
    std::cout << spec.toJson().dump(2) << "\n";
    return;
  }
  const bool synthetic = a.run.given("--synthetic");
  const bool datasetMode = predictsDataset(a);
  if (!synthetic && a.out.empty())
    throw InvalidArgument(datasetMode ? "give --out DIR: the folder for <case>.nii.gz and summary.json"
                                      : "give --out FILE (.nii.gz, .nrrd or .mha) for the segmentation");
  const auto placement = spec.resolvePlacement(net->stageNames(), engine::runnableDeviceNames().front());
  nlohmann::json out;  // printed once the ranks (if any) have reported their memory peaks
  int failedCases = 0;  // --dataset: cases that could not be predicted (reported, the rest went on)
  auto use = [&](engine::Inferer& inferer) {
    if (synthetic) {
      out = predictPhantom(a, spec, inferer, *net, placement, env);
      return;
    }
#ifdef SPLITSEG_WITH_ITK
    const auto local = ranks::localStages(*net, placement, env.distributed());
    if (datasetMode) {
      out = inferDataset(a, spec, inferer, *net, placement.describe(), local, failedCases);
      return;
    }
    out = inferVolume(a, spec, inferer, *net, placement.describe(), local, spec.data.image,
                      a.run.given("--label") ? spec.data.label : std::string(), a.out);
#else
    throw InvalidArgument("this build has no image IO (built without ITK): use --synthetic SIZE");
#endif
  };
  launch::Launch how;
  how.ranks = env;
  const auto peaks = launch::infer(
      spec, net, [&](engine::Inferer& inferer, const ranks::LocalStages&, const engine::InferOptions&) { use(inferer); }, how);
  if (out.contains("memory"))
    // The larger: a prediction's own peaks came per image (restartOtherPeaks); these are since.
    for (const auto& [device, bytes] : peaks) {
      auto& m = out["memory"]["measured"][device];
      m = m.is_number() ? std::max(m.get<std::int64_t>(), bytes) : bytes;
    }
  if (!out.is_null()) std::cout << out.dump() << "\n";
  failIfCasesFailed(failedCases);
}
} // namespace

void addInferCommands(CLI::App& app) {
  auto a = std::make_shared<InferArgs>();
  auto* cmd = app.add_subcommand("infer", "predict a segmentation (whole volume or sliding window)");
  a->run.addNetwork(*cmd);
  a->run.addData(*cmd);
  a->run.addExecution(*cmd);
  addRankNetworkOptions(*cmd);
  a->run.addSession(*cmd);
  cmd->add_option("--out", a->out, "segmentation to write, in the image's geometry");
  cmd->add_option("--checkpoint", a->checkpoint, "trained checkpoint (its run gives network and preprocessing)");
  cmd->add_option("--window", a->window,
                  "sliding window N or X,Y,Z, or 'largest': the largest cube the memory planner fits on the devices (default: whole volume)");
  a->overlapGiven = cmd->add_option("--overlap", a->overlap, "window overlap")->capture_default_str()->check(CLI::Range(0.0, 0.95));
  cmd->add_flag("--keep-largest", a->keepLargest,
                "--image: keep only each label's largest connected region (26 neighbours; nnU-Net's post-processing)");
  cmd->add_option("--mirror", a->mirror,
                  "test-time mirroring as nnU-Net: average the logits over flips along these axes, e.g. xyz "
                  "(8 passes per window), z, or none (default: the run's)");
  a->batchGiven = cmd->add_option("--batch", a->batch, "windows per forward pass (default: 1, or the micro-batches)")
                      ->capture_default_str()
                      ->check(CLI::PositiveNumber);
  a->microGiven = cmd->add_option("--micro-batches", a->microBatches,
                                  "ranks: each pass's windows flow through the ranks as M micro-batches, the ranks "
                                  "working on different windows at once (default: the run's)")
                      ->check(CLI::Range(1, 4096));
  cmd->add_option("--progress", a->progress, "jsonl|bar|none")->capture_default_str();
  cmd->add_option("--seed", a->seed, "phantom seed")->capture_default_str();
  cmd->add_option("--cases", a->cases,
                  "--dataset: which cases to predict and score: all (default), or validation / training, the split "
                  "training made (with --checkpoint and no --dataset, the dataset it trained on)")
      ->check(CLI::IsMember({"all", "validation", "training"}));
  cmd->add_option("--probabilities", a->probabilities,
                  "with --synthetic: also save the predicted probabilities (C, D, H, W) as a LibTorch tensor file");
  cmd->callback([a] { runInfer(*a); });
}

} // namespace splitseg::cli
