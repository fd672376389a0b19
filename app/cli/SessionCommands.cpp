// Sessions in the CLI: `session show` prints a session with its paths resolved and what is
// missing; `session save` writes one from options (for scripts and tests). `--session FILE` on
// train and infer (RunOptions) starts from the session's run description.
#include "app/cli/Commands.h"
#include "core/base/JsonReader.h"
#include "core/base/JsonText.h"
#include "core/base/Printable.h"
#include "core/base/Error.h"
#include "core/session/Session.h"

#include <filesystem>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {

struct SaveArgs {
  std::string out;
  std::vector<std::string> images, labels;
  std::string dataset, arch = "unet3d", options, placement, checkpoint;
};

} // namespace

void addSessionCommands(CLI::App& app) {
  auto* cmd = app.add_subcommand("session", "show or write .splitseg session files");
  cmd->require_subcommand(1);
  auto showPath = std::make_shared<std::string>();
  auto* show = cmd->add_subcommand("show", "print a session with resolved paths; missing files are listed");
  show->add_option("file", *showPath, "session file")->required();
  show->callback([showPath] {
    const auto r = session::loadSession(*showPath);
    nlohmann::json out = session::toJson(r.session, "", true);  // absolute paths, escaped if not UTF-8
    // Warnings escaped as every message is (JSON escapes control characters itself).
    nlohmann::json warnings = nlohmann::json::array();
    for (const auto& w : r.warnings) warnings.push_back(printable(w));
    out["warnings"] = warnings;
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
    auto absolute = [](const std::string& p) {
      return p.empty() ? p : std::filesystem::absolute(p).lexically_normal().string();
    };
    auto& r = s.run;
    if (!a->dataset.empty()) {
      r.data.kind = run::DataKind::Dataset;
      r.data.dataset = absolute(a->dataset);
    } else if (!a->images.empty()) {
      r.data.kind = a->labels.empty() ? run::DataKind::Volume : run::DataKind::Pairs;
      r.data.image = absolute(a->images.front());
      if (!a->labels.empty()) r.data.label = absolute(a->labels.front());
    }
    r.architecture = a->arch;
    if (!a->options.empty()) r.networkOptions = parseJson(a->options, "--options");
    if (!a->placement.empty()) {
      // {"stages": {stage: device}} (placement::Placement's JSON) or {stage: device}.
      const auto p = parseJson(a->placement, "--placement");
      const JsonField placement(p, "--placement");
      const auto stages = placement.fields(UnknownKeys::Ignore).take("stages");
      for (const auto& [stage, device] : (stages ? *stages : placement).entries())
        r.placement[stage] = device.as<std::string>();
    }
    r.checkpoint = absolute(a->checkpoint);
    session::saveSession(s, a->out);
    std::cout << nlohmann::json{{"out", a->out}}.dump() << "\n";
  });
}

} // namespace splitseg::cli
