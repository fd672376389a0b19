#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "core/base/Units.h"
#include "core/engine/Devices.h"

#include <cstdio>
#include <iostream>

namespace splitseg::cli {

void addDeviceCommands(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "list the devices LibTorch sees, with their memory");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([json] {
    const auto devices = engine::detectDevices();
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& d : devices) {
        nlohmann::json j{{"name", d.name}, {"description", d.description}, {"total", d.totalBytes}, {"free", d.freeBytes}};
        if (d.name != "cpu")
          j["allowance"] = {{"context", d.cuda.contextBytes}, {"workspace", d.cuda.workspaceBytes},
                            {"method", d.cuda.method}, {"planned", d.allowanceBytes}};
        if (!d.warnings.empty()) j["warnings"] = d.warnings;
        out.push_back(j);
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::printf("%-8s %-28s %12s %12s\n", "device", "description", "total", "free");
    for (const auto& d : devices)
      std::printf("%-8s %-28s %12s %12s\n", d.name.c_str(), d.description.c_str(),
                  formatBytes(double(d.totalBytes)).c_str(), formatBytes(double(d.freeBytes)).c_str());
    for (const auto& d : devices) {
      if (d.name == "cpu") continue;
      if (d.cuda.measured())
        std::printf("%s allowance (measured, %s): context %s + cuDNN workspace %s\n", d.name.c_str(),
                    d.cuda.method.c_str(), formatBytes(double(d.cuda.contextBytes)).c_str(),
                    formatBytes(double(d.cuda.workspaceBytes)).c_str());
      else
        std::printf("%s allowance not measured (%s): the planner uses its default\n", d.name.c_str(),
                    d.cuda.method.c_str());
      for (const auto& w : d.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    }
  });
}

} // namespace splitseg::cli
