#include "app/cli/RunOptions.h"
#include "core/base/JsonReader.h"
#include "core/base/JsonText.h"
#include "core/base/Printable.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/plugin/PluginRegistry.h"
#include "core/session/Session.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {
nlohmann::json parseObject(const std::string& text, const std::string& flag) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json j;
  try {
    if (text.front() != '{') {  // a file holding the JSON
      std::error_code ec;
      if (!std::filesystem::is_regular_file(text, ec))
        throw InvalidArgument(flag + ": neither a JSON object nor a readable file: " + text);
      j = readJsonFile(text);
    } else {
      j = parseJson(text, flag);
    }
  } catch (const JsonRefused& e) {
    throw InvalidArgument(flag + ": bad JSON: " + e.detail());
  }
  return JsonField(j, flag).object("a JSON object");
}

std::array<double, 3> parseSpacing(const std::string& text) {
  std::array<double, 3> s{0, 0, 0};
  std::stringstream ss(text);
  std::string part;
  int n = 0;
  try {
    while (std::getline(ss, part, ',')) {
      if (n >= 3) throw InvalidArgument("");
      s[n++] = std::stod(part);
    }
  } catch (const std::exception&) {
    n = 0;
  }
  if (n != 3) throw InvalidArgument("--spacing must be X,Y,Z in mm, got '" + text + "'");
  return s;
}
} // namespace

bool RunOptions::given(const std::string& flag) const {
  for (auto* o : options_)
    if (o->check_name(flag)) return o->count() > 0;
  return false;
}

void RunOptions::addNetwork(CLI::App& cmd) {
  remember(cmd.add_option("--arch", arch, "network architecture (splitseg-cli plugins lists them)"));
  remember(cmd.add_option("--arch-options", archOptions,
                          "architecture options: JSON object or file (overrides --base/--depth/--norm)"));
  remember(cmd.add_option("--base", net.base, "base channels of the U-Net")->capture_default_str()
               ->check(CLI::PositiveNumber));
  remember(cmd.add_option("--depth", net.depth, "U-Net depth (levels)")->capture_default_str()->check(CLI::Range(2, 7)));
  remember(cmd.add_option("--classes", net.classes, "foreground classes")->capture_default_str()->check(CLI::Range(1, 64)));
  remember(cmd.add_option("--norm", net.norm, "none|instance|batch")->capture_default_str());
}

void RunOptions::addExecution(CLI::App& cmd) {
  remember(cmd.add_option("--placement", placement,
                          "stage=device pairs (enc0=cuda:0,dec0=cpu; unnamed stages go to the first device) or a JSON file"));
  remember(cmd.add_option("--precision", precision,
                          "fp32 | bf16 (every stage) | P:stage,stage (those stages in P, the others in the other: "
                          "bf16:enc0,dec0, fp32:head)"));
  remember(cmd.add_option("--recompute", recompute, "activation checkpointing: all, none or a stage list (enc0,dec0)"));
  remember(cmd.add_option("--cpu-budget", cpuBudget,
                          "CPU memory budget (e.g. 2GiB): every CPU's capacity in the plan; a training step or a "
                          "prediction beyond it fails as out of memory"));
  remember(cmd.add_option("--rank-timeout", rankTimeout,
                          "ranks: seconds to wait for another rank before stopping (it died, hangs or is unreachable)")
               ->check(CLI::Range(1, 86400)));
}

void RunOptions::addShape(CLI::App& cmd) {
  remember(cmd.add_option("--patch", patch, "patch (network input) size N or X,Y,Z"));
  remember(cmd.add_option("--batch", batch, "batch size")->check(CLI::PositiveNumber));
  remember(cmd.add_option("--micro-batches", microBatches,
                          "ranks: split each batch into M micro-batches that flow through the ranks (GPipe)")
               ->check(CLI::PositiveNumber));
  remember(cmd.add_option("--shard-axis", shardAxis,
                          "sharded stages (dec0=cuda:0+cuda:1): cut the volume along depth | height | width"));
}

void RunOptions::addSchedule(CLI::App& cmd) {
  remember(cmd.add_option("--steps", steps, "optimizer steps")->check(CLI::PositiveNumber));
  remember(cmd.add_option("--epochs", epochs, "epochs (overrides --steps)")->check(CLI::NonNegativeNumber));
  remember(cmd.add_option("--steps-per-epoch", stepsPerEpoch, "steps per epoch"));
  remember(cmd.add_option("--lr", lr, "Adam learning rate")->check(CLI::PositiveNumber));
  remember(cmd.add_option("--lr-schedule", lrSchedule,
                          "learning rate over the run: constant, poly (nnU-Net's (1 - t/T)^0.9) or cosine, to 0 at the last step"));
  remember(cmd.add_option("--seed", seed, "random seed"));
  remember(cmd.add_option("--validate-every", validateEvery, "validate every N steps"));
  remember(cmd.add_option("--checkpoint-every", checkpointEvery, "write the checkpoint every N steps"));
  remember(cmd.add_option("--save", save, "checkpoint file to write"));
  remember(cmd.add_flag("--offload", offload,
                        "host offload: recomputed stages on GPUs keep their saved inputs in pinned host memory "
                        "(larger volumes; two host copies of those inputs per step)"));
  remember(cmd.add_option("--cpu-layout", cpuLayout,
                          "weights of fp32 CPU stages while training: auto (channels-last on CPUs without AVX-512), "
                          "ncdhw or channels-last"));
  remember(cmd.add_flag("--timeline", timeline,
                        "record each device's forward/backward/recompute/transfer/wait spans per step (in --progress jsonl)"));
}

void RunOptions::addData(CLI::App& cmd) {
  remember(cmd.add_option("--synthetic", synthetic, "synthetic phantoms of this size (N or X,Y,Z; also the patch)"));
  remember(cmd.add_option("--dataset", dataset, "dataset folder: MSD (dataset.json) or nnU-Net raw layout"));
  remember(cmd.add_option("--image", image, "image volume"));
  remember(cmd.add_option("--label", label, "label map (with --image)"));
  remember(cmd.add_option("--intensity", intensity,
                          "intensity preset (ct-soft-tissue, ct-bone, ct-lung, ct-brain, ct-full, mr-zscore, none)"));
  remember(cmd.add_option("--spacing", spacing, "resample to this spacing in mm (X,Y,Z)"));
}

void RunOptions::addSession(CLI::App& cmd) {
  remember(cmd.add_option("--session", session_, "start from this .splitseg session's run; flags given here overlay it"));
  remember(cmd.add_flag("--print-run", printRun_, "print the run description (JSON) and exit without running"));
}

run::RunSpec RunOptions::build(const run::RunSpec& base) const {
  run::RunSpec r = base;
  if (!session_.empty()) {
    auto loaded = session::loadSession(session_);
    // The session's paths are someone else's bytes: escaped, one line each, never raw to a terminal.
    for (const auto& w : loaded.warnings) std::cerr << printable("session " + session_ + ": " + w) << "\n";
    r = loaded.session.run;
  }
  // Network: a new architecture starts from its defaults; the U-Net flags set their keys.
  if (given("--arch") && arch != r.architecture) {
    r.architecture = arch;
    r.networkOptions = nlohmann::json::object();
  }
  auto& o = r.networkOptions;
  if (given("--base")) o["base_channels"] = net.base;
  if (given("--depth")) o["depth"] = net.depth;
  if (given("--norm")) o["norm"] = net.norm;
  if (given("--classes")) o["out_channels"] = net.classes == 1 ? 1 : net.classes + 1;
  if (given("--arch-options")) o.update(parseObject(archOptions, "--arch-options"));

  if (given("--precision")) r.precision = placement::StagePrecisions::parse(precision);
  if (given("--patch")) r.patch = run::parseSize(patch);
  if (given("--batch")) r.batch = batch;
  if (given("--micro-batches")) r.microBatches = microBatches;
  if (given("--shard-axis")) r.shardAxis = placement::shardAxisFromString(shardAxis);
  if (given("--rank-timeout")) r.rankTimeoutSeconds = rankTimeout;
  if (given("--timeline")) r.timeline = timeline;
  if (given("--offload")) r.offload = offload;
  if (given("--cpu-layout")) r.cpuLayout = planner::cpuLayoutFromString(cpuLayout);
  if (given("--steps")) r.steps = steps;
  if (given("--epochs")) r.epochs = epochs;
  if (given("--steps-per-epoch")) r.stepsPerEpoch = stepsPerEpoch;
  if (given("--lr")) r.learningRate = lr;
  if (given("--lr-schedule")) {
    try {
      r.lrSchedule = run::lrScheduleFromString(lrSchedule);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--lr-schedule: ") + e.what());
    }
  }
  if (given("--seed")) r.seed = seed;
  if (given("--validate-every")) r.validateEvery = validateEvery;
  if (given("--checkpoint-every")) r.checkpointEvery = checkpointEvery;
  if (given("--cpu-budget")) r.cpuBudgetBytes = cpuBudget.empty() ? 0 : parseBytes(cpuBudget);
  if (given("--save")) r.checkpoint = std::filesystem::absolute(save).lexically_normal().string();

  auto absolute = [](const std::string& p) { return std::filesystem::absolute(p).lexically_normal().string(); };
  if (given("--synthetic")) {
    r.data = {};
    r.data.kind = run::DataKind::Synthetic;
    r.patch = run::parseSize(synthetic);
  } else if (given("--dataset")) {
    r.data.kind = run::DataKind::Dataset;
    r.data.dataset = absolute(dataset);
  } else if (given("--image")) {
    r.data.kind = given("--label") ? run::DataKind::Pairs : run::DataKind::Volume;
    r.data.image = absolute(image);
    if (given("--label")) r.data.label = absolute(label);
  }
  if (given("--intensity")) r.preprocessing.intensity = intensityPreset(intensity);
  if (given("--spacing")) r.preprocessing.targetSpacing = parseSpacing(spacing);
  r.networkOptions = resolvedNetworkOptions(r);
  return r;
}

void RunOptions::applyStages(run::RunSpec& r, const std::vector<std::string>& stages) const {
  if (given("--recompute")) r.recompute = run::parseStageList(recompute, stages);
  if (given("--placement")) {
    // Unnamed stages keep the run's device for them (the first device when it names none).
    const auto parsed = placement::Placement::parse(placement, stages, "cpu");
    const bool pairs = placement.find('=') != std::string::npos && placement.front() != '{';
    if (!pairs) r.placement.clear();
    std::set<std::string> named;
    if (pairs) {
      std::stringstream ss(placement);
      std::string item;
      while (std::getline(ss, item, ','))
        if (auto eq = item.find('='); eq != std::string::npos) {
          auto name = item.substr(0, eq);
          name.erase(0, name.find_first_not_of(" \t"));
          name.erase(name.find_last_not_of(" \t") + 1);
          named.insert(name);
        }
    }
    for (const auto& s : stages)
      if (!pairs || named.count(s)) r.placement[s] = parsed.entryOf(s);
  }
  r.precision = placement::StagePrecisions::parse(r.precision.toString(), stages);  // names checked
}

nlohmann::json RunOptions::resolvedNetworkOptions(const run::RunSpec& spec) {
  auto& registry = plugin::PluginRegistry::instance();
  nlohmann::json o = nlohmann::json::parse(registry.info(spec.architecture).defaultOptionsJson);
  o.update(spec.networkOptions);
  return o;
}

} // namespace splitseg::cli
