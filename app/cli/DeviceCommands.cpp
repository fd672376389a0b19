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
      for (const auto& d : devices)
        out.push_back({{"name", d.name}, {"description", d.description}, {"total", d.totalBytes}, {"free", d.freeBytes}});
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::printf("%-8s %-28s %12s %12s\n", "device", "description", "total", "free");
    for (const auto& d : devices)
      std::printf("%-8s %-28s %12s %12s\n", d.name.c_str(), d.description.c_str(),
                  formatBytes(double(d.totalBytes)).c_str(), formatBytes(double(d.freeBytes)).c_str());
  });
}

} // namespace splitseg::cli
