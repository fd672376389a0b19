// `plugins`: which architectures are available, where they came from, and why any plugin did
// not load. Also the CLI's single way to build a network by architecture name (train --arch).
#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/plugin/PluginRegistry.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

namespace {
nlohmann::json parseOptions(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  std::string json = text;
  // Not inline JSON: a file holding it (--arch-options opts.json).
  if (text.front() != '{') {
    std::ifstream in(text);
    if (!in) throw InvalidArgument("--arch-options: neither a JSON object nor a readable file: " + text);
    std::stringstream ss;
    ss << in.rdbuf();
    json = ss.str();
  }
  try {
    auto j = nlohmann::json::parse(json);
    if (!j.is_object()) throw InvalidArgument("--arch-options must be a JSON object");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("--arch-options: bad JSON: ") + e.what());
  }
}
} // namespace

std::string networkOptionsJson(const std::string& arch, const std::string& optionsJson, const NetworkArgs& net) {
  auto& registry = plugin::PluginRegistry::instance();
  const std::string name = arch.empty() ? "unet3d" : arch;
  nlohmann::json options;
  if (name == "unet3d") {
    // The U-Net keeps its dedicated flags (--base, --depth, --norm); --arch-options overrides them.
    options = nlohmann::json::parse(net.options().toJson());
    options.update(parseOptions(optionsJson));
  } else {
    options = nlohmann::json::parse(registry.info(name).defaultOptionsJson);
    options.update(parseOptions(optionsJson));
    // Channel counts follow the data (dataset channels, --classes), as for the U-Net.
    const auto unet = net.options();
    options["in_channels"] = unet.in_channels();
    options["out_channels"] = unet.out_channels();
  }
  return options.dump();
}

std::shared_ptr<model::StagedNetwork> makeNetwork(const std::string& arch, const std::string& optionsJson,
                                                  const NetworkArgs& net) {
  const std::string name = arch.empty() ? "unet3d" : arch;
  return plugin::PluginRegistry::instance().create(name, networkOptionsJson(name, optionsJson, net));
}

void addPluginCommands(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("plugins", "list network architectures: built-in and from plugins, and plugins that failed");
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->add_option("--path", *paths, "also load plugins from this folder (repeatable; see also SPLITSEG_PLUGIN_PATH)");
  cmd->callback([json, paths] {
    auto& registry = plugin::PluginRegistry::instance();
    for (const auto& p : *paths) registry.addFolder(p);
    const auto archs = registry.architectures();
    const auto failures = registry.failures();
    if (*json) {
      nlohmann::json out{{"architectures", nlohmann::json::array()},
                         {"failed", nlohmann::json::array()},
                         {"folders", registry.folders()}};
      for (const auto& a : archs)
        out["architectures"].push_back({{"name", a.name}, {"description", a.description}, {"source", a.source},
                                        {"default_options", nlohmann::json::parse(a.defaultOptionsJson)}});
      for (const auto& f : failures) out["failed"].push_back({{"path", f.path}, {"reason", f.reason}});
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::cout << "Architectures:\n";
    for (const auto& a : archs)
      std::cout << "  " << a.name << "  [" << a.source << "]\n    " << a.description << "\n    defaults "
                << a.defaultOptionsJson << "\n";
    std::cout << "Plugin folders searched:\n";
    for (const auto& f : registry.folders()) std::cout << "  " << f << "\n";
    if (!failures.empty()) {
      std::cout << "Plugins that did not load:\n";
      for (const auto& f : failures) std::cout << "  " << f.path << ": " << f.reason << "\n";
    }
  });
}

} // namespace splitseg::cli
