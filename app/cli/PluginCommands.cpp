// `plugins`: which architectures are available, where they came from, and why any plugin did
// not load. Networks are built by the registry from the run description (RunOptions).
#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/plugin/PluginRegistry.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

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
