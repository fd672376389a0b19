#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/Devices.h"
#include "core/engine/Trainer.h"
#include "core/placement/AutoPlacer.h"

#ifdef SPLITSEG_WITH_ITK
#include "core/dataset/DatasetSource.h"
#endif

#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {
struct TrainArgs {
  NetworkArgs net;
  std::string arch = "unet3d";
  std::string archOptions;
  std::string synthetic;
  std::string dataset;
  std::string image;
  std::string label;
  std::string patch = "64";
  std::string intensity = "ct-soft-tissue";
  std::string spacing;
  std::int64_t steps = 100;
  int epochs = 0;
  std::int64_t stepsPerEpoch = 50;
  int batch = 1;
  double lr = 1e-3;
  std::uint64_t seed = 0;
  std::string placement;
  std::string precision = "fp32";
  std::string recompute;
  std::string save;
  std::int64_t checkpointEvery = 0;
  std::int64_t validateEvery = 0;
  std::string resume;
  std::string progress = "bar";
  std::string cpuBudget;
};

std::set<std::string> parseStageList(const std::string& text, const std::vector<std::string>& stages) {
  std::set<std::string> out;
  if (text.empty()) return out;
  if (text == "all") return {stages.begin(), stages.end()};
  std::stringstream ss(text);
  std::string s;
  while (std::getline(ss, s, ',')) {
    if (std::find(stages.begin(), stages.end(), s) == stages.end())
      throw InvalidArgument("unknown stage '" + s + "' in --recompute");
    out.insert(s);
  }
  return out;
}

// After an out-of-memory step: what the planner would do instead on these devices.
std::string planSuggestion(model::StagedNetwork& net, const engine::TrainerOptions& o,
                           const engine::ExecutorOptions& exec) {
  try {
    placement::PlanRequest req;
    req.size = {o.patch[2], o.patch[1], o.patch[0]};
    req.batch = o.batch;
    const auto precisions = placement::StagePrecisions::parse(exec.precisionText());
    req.precision = precisions.fallback;
    req.stagePrecision = precisions.stages;
    req.checkpoint = exec.checkpointStages;
    for (const auto& d : engine::detectDevices()) {
      placement::DeviceSpec spec{d.name, d.name == "cpu" && o.cpuBudgetBytes > 0 ? o.cpuBudgetBytes : d.totalBytes,
                                 d.allowanceBytes};
      req.devices.push_back(spec);
    }
    placement::MemoryPlanner planner(placement::NetworkStructure::fromNetwork(net));
    auto best = placement::AutoPlacer(planner).place(req);
    if (best.plan.fits) return "the planner suggests --placement " + best.placement.toInline();
    return "no placement of this network fits these devices at this size (limit: stage " + best.plan.limitingStage +
           " on " + best.plan.limitingDevice + "); try --precision bf16, --recompute all or a smaller patch";
  } catch (const std::exception& e) {
    return std::string("(no plan: ") + e.what() + ")";
  }
}

void runTrain(const TrainArgs& a) {
  std::shared_ptr<data::SampleSource> source;
  std::string preprocessing = "{}";
  std::array<std::int64_t, 3> patch{};
  NetworkArgs netArgs = a.net;
  if (a.synthetic.empty() && a.dataset.empty() && (a.image.empty() || a.label.empty()))
    throw InvalidArgument("give training data: --synthetic SIZE, --dataset DIR, or --image FILE --label FILE");
  if (!a.synthetic.empty()) {
    patch = parseSize(a.synthetic);
    source = std::make_shared<data::PhantomSource>(a.net.classes);
  } else {
#ifdef SPLITSEG_WITH_ITK
    auto ds = a.dataset.empty() ? dataset::datasetFromPairs({{a.image, a.label}}) : dataset::openDataset(a.dataset);
    dataset::DatasetSourceOptions so;
    so.preprocessing.intensity = intensityPreset(a.intensity);
    if (!a.spacing.empty()) {
      std::stringstream ss(a.spacing);
      std::string part;
      for (int i = 0; i < 3 && std::getline(ss, part, ','); ++i) so.preprocessing.targetSpacing[i] = std::stod(part);
    }
    if (ds.cases.size() < 2) so.validationFraction = 0.0;  // a single case trains on itself
    auto dsrc = std::make_shared<dataset::DatasetSource>(ds, so);
    preprocessing = dsrc->preprocessingJson();
    netArgs.inChannels = dsrc->channelCount();
    netArgs.classes = dsrc->foregroundClasses();
    source = dsrc;
    patch = parseSize(a.patch);
#else
    throw InvalidArgument("this build has no image IO (built without ITK): use --synthetic SIZE");
#endif
  }
  torch::manual_seed(a.seed);  // --seed fixes the initial weights too
  std::shared_ptr<model::StagedNetwork> net = makeNetwork(a.arch, a.archOptions, netArgs);
  const auto devices = engine::runnableDeviceNames();
  auto placement = placement::Placement::parse(a.placement, net->stageNames(), devices.front());

  engine::TrainerOptions o;
  o.steps = a.steps;
  o.epochs = a.epochs;
  o.stepsPerEpoch = a.stepsPerEpoch;
  o.batch = a.batch;
  o.learningRate = a.lr;
  o.seed = a.seed;
  o.patch = patch;
  o.preprocessingJson = preprocessing;
  o.checkpointPath = a.save;
  o.checkpointEvery = a.checkpointEvery;
  o.validateEvery = a.validateEvery;
  if (!a.cpuBudget.empty()) o.cpuBudgetBytes = parseBytes(a.cpuBudget);
  engine::ExecutorOptions exec;
  exec.setPrecisionText(a.precision, net->stageNames());
  exec.checkpointStages = parseStageList(a.recompute, net->stageNames());

  engine::Trainer trainer(net, placement, source, o, exec);
  if (!a.resume.empty()) trainer.loadCheckpoint(a.resume);
  CliMetrics metrics(a.progress);
  if (a.progress == "bar")
    std::cerr << net->architecture() << " " << net->optionsJson() << " (" << net->parameterCount()
              << " parameters) on " << placement.describe() << "\n";
  try {
    trainer.run(&metrics);
  } catch (const OutOfMemoryError& e) {
    // Model, optimizer and the last checkpoint are intact; say what would fit.
    throw OutOfMemoryError(e.device(), e.stage(),
                           std::string("step ") + std::to_string(trainer.stepsDone() + 1) + " abandoned; " +
                               planSuggestion(*net, o, exec));
  }
}
} // namespace

void addTrainCommands(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "train the split U-Net");
  a->net.add(*cmd);
  cmd->add_option("--arch", a->arch, "network architecture (splitseg-cli plugins lists them)")->capture_default_str();
  cmd->add_option("--arch-options", a->archOptions, "architecture options: JSON object or file (overrides --base/--depth/--norm)");
  cmd->add_option("--synthetic", a->synthetic, "train on synthetic phantoms of this size (N or X,Y,Z)");
  cmd->add_option("--dataset", a->dataset, "dataset folder: MSD (dataset.json) or nnU-Net raw layout");
  cmd->add_option("--image", a->image, "training image (with --label)");
  cmd->add_option("--label", a->label, "training label map (with --image)");
  cmd->add_option("--patch", a->patch, "patch size N or X,Y,Z for --dataset/--image")->capture_default_str();
  cmd->add_option("--intensity", a->intensity, "intensity preset (ct-soft-tissue, ct-bone, ct-lung, ct-brain, ct-full, mr-zscore, none)")
      ->capture_default_str();
  cmd->add_option("--spacing", a->spacing, "resample to this spacing in mm (X,Y,Z)");
  cmd->add_option("--steps", a->steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--epochs", a->epochs, "epochs (overrides --steps)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--steps-per-epoch", a->stepsPerEpoch, "steps per epoch")->capture_default_str();
  cmd->add_option("--batch", a->batch, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--lr", a->lr, "Adam learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
  cmd->add_option("--placement", a->placement,
                  "stage=device pairs (enc0=cuda:0,dec0=cpu; unnamed stages go to the first device) or a JSON file");
  cmd->add_option("--precision", a->precision,
                  "fp32 | bf16 (every stage) | P:stage,stage (those stages in P, the others in the other: "
                  "bf16:enc0,dec0, fp32:head)")
      ->capture_default_str();
  cmd->add_option("--recompute", a->recompute, "activation checkpointing: all or a stage list (enc0,dec0)");
  cmd->add_option("--save", a->save, "checkpoint file to write");
  cmd->add_option("--checkpoint-every", a->checkpointEvery, "write the checkpoint every N steps");
  cmd->add_option("--validate-every", a->validateEvery, "validate every N steps");
  cmd->add_option("--resume", a->resume, "continue from this checkpoint");
  cmd->add_option("--progress", a->progress, "jsonl|bar|none")->capture_default_str()
      ->check(CLI::IsMember({"jsonl", "bar", "none"}));
  cmd->add_option("--cpu-budget", a->cpuBudget, "CPU memory budget (e.g. 2GiB); a step beyond it fails as out of memory");
  cmd->callback([a] { runTrain(*a); });
}

} // namespace splitseg::cli
