// Sessions in the CLI: `--session FILE` on train and infer fills every option the command
// line did not give from a .splitseg file; `session show` prints a session with its paths
// resolved and what is missing; `session save` writes one from options (for scripts and tests).
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/session/Session.h"

#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {

// Sets an option of `cmd` as if given on the command line, unless the user gave it.
void fill(CLI::App& cmd, const std::string& name, const std::string& value) {
  auto* opt = cmd.get_option_no_throw(name);
  if (!opt || opt->count() > 0 || value.empty()) return;
  opt->add_result(value);
  opt->run_callback();
}

std::string joinXyz(const std::array<std::int64_t, 3>& v) {
  return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
}

void applySession(CLI::App& cmd, const std::string& path, bool training) {
  auto loaded = session::loadSession(path);
  for (const auto& w : loaded.warnings) std::cerr << "session " << path << ": " << w << "\n";
  const auto& s = loaded.session;
  fill(cmd, "--arch", s.architecture);
  if (!s.options.empty()) fill(cmd, "--arch-options", s.options.dump());
  if (!s.placement.empty()) fill(cmd, "--placement", s.placement.dump());
  if (const auto* image = s.firstVolume("image"); image && !image->missing) fill(cmd, "--image", image->path);
  if (training) {
    if (!s.dataset.empty() && !s.datasetMissing && cmd.get_option("--image")->count() == 0)
      fill(cmd, "--dataset", s.dataset);
    if (const auto* label = s.firstVolume("label"); label && !label->missing) fill(cmd, "--label", label->path);
    const auto& t = s.training;
    fill(cmd, "--steps", std::to_string(t.steps));
    if (t.epochs > 0) fill(cmd, "--epochs", std::to_string(t.epochs));
    fill(cmd, "--steps-per-epoch", std::to_string(t.stepsPerEpoch));
    fill(cmd, "--batch", std::to_string(t.batch));
    std::ostringstream lr;
    lr.precision(17);
    lr << t.learningRate;
    fill(cmd, "--lr", lr.str());
    fill(cmd, "--seed", std::to_string(t.seed));
    fill(cmd, "--patch", joinXyz(t.patch));
    fill(cmd, "--precision", t.precision);
    std::string recompute;
    for (const auto& st : t.recompute) recompute += (recompute.empty() ? "" : ",") + st;
    fill(cmd, "--recompute", recompute);
    fill(cmd, "--intensity", t.intensity);
    if (t.spacing[0] > 0) {
      std::ostringstream sp;
      sp << t.spacing[0] << "," << t.spacing[1] << "," << t.spacing[2];
      fill(cmd, "--spacing", sp.str());
    }
    if (t.validateEvery > 0) fill(cmd, "--validate-every", std::to_string(t.validateEvery));
    if (t.checkpointEvery > 0) fill(cmd, "--checkpoint-every", std::to_string(t.checkpointEvery));
    fill(cmd, "--cpu-budget", t.cpuBudget);
    fill(cmd, "--save", s.checkpoint);  // training writes the session's checkpoint
  } else if (!s.checkpoint.empty()) {
    if (s.checkpointMissing) throw IoError(s.checkpoint, "the session's checkpoint is missing; cannot infer");
    fill(cmd, "--checkpoint", s.checkpoint);
  }
}

void addSessionOption(CLI::App& app, const std::string& name, bool training) {
  CLI::App* cmd = nullptr;
  try {
    cmd = app.get_subcommand(name);
  } catch (const CLI::OptionNotFound&) {
    return;
  }
  auto path = std::make_shared<std::string>();
  cmd->add_option("--session", *path, "take every option not given here from this .splitseg session");
  // Runs after this subcommand's own options are parsed and before its callback.
  cmd->parse_complete_callback([cmd, path, training] {
    if (!path->empty()) applySession(*cmd, *path, training);
  });
}

struct SaveArgs {
  std::string out;
  std::vector<std::string> images, labels;
  std::string dataset, arch = "unet3d", options, placement, checkpoint;
};

} // namespace

void addSessionCommands(CLI::App& app) {
  addSessionOption(app, "train", true);
  addSessionOption(app, "infer", false);

  auto* cmd = app.add_subcommand("session", "show or write .splitseg session files");
  cmd->require_subcommand(1);
  auto showPath = std::make_shared<std::string>();
  auto* show = cmd->add_subcommand("show", "print a session with resolved paths; missing files are listed");
  show->add_option("file", *showPath, "session file")->required();
  show->callback([showPath] {
    const auto r = session::loadSession(*showPath);
    nlohmann::json out = session::toJson(r.session, "");  // absolute paths
    out["warnings"] = r.warnings;
    std::cout << out.dump(2) << "\n";
  });

  auto a = std::make_shared<SaveArgs>();
  auto* save = cmd->add_subcommand("save", "write a session file from these options");
  save->add_option("--out", a->out, "session file (.splitseg)")->required();
  save->add_option("--image", a->images, "image volume (repeatable)");
  save->add_option("--label", a->labels, "label volume (repeatable)");
  save->add_option("--dataset", a->dataset, "dataset folder");
  save->add_option("--arch", a->arch, "architecture")->capture_default_str();
  save->add_option("--arch-options", a->options, "architecture options (JSON object)");
  save->add_option("--placement", a->placement, "placement JSON");
  save->add_option("--checkpoint", a->checkpoint, "checkpoint in use");
  save->callback([a] {
    session::Session s;
    for (const auto& p : a->images) s.volumes.push_back({p, "image", "", false});
    for (const auto& p : a->labels) s.volumes.push_back({p, "label", "", false});
    s.dataset = a->dataset;
    s.architecture = a->arch;
    try {
      if (!a->options.empty()) s.options = nlohmann::json::parse(a->options);
      if (!a->placement.empty()) s.placement = nlohmann::json::parse(a->placement);
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(std::string("session save: bad JSON: ") + e.what());
    }
    s.checkpoint = a->checkpoint;
    session::saveSession(s, a->out);
    std::cout << nlohmann::json{{"out", a->out}}.dump() << "\n";
  });
}

} // namespace splitseg::cli
