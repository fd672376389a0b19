#pragma once
// Each group of subcommands lives in its own file and registers itself on the app.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::cli {

void addDeviceCommands(CLI::App& app);   // devices
void addTrainCommands(CLI::App& app);    // train
void addInferCommands(CLI::App& app);    // infer
void addBenchCommands(CLI::App& app);    // bench
void addPlanCommands(CLI::App& app);     // plan (PlanCommand.cpp)
void addPluginCommands(CLI::App& app);   // plugins (PluginCommands.cpp)
void addExportCommands(CLI::App& app);   // export (ExportCommands.cpp)
// session show|save, and --session on train/infer: call after those are added (SessionCommands.cpp)
void addSessionCommands(CLI::App& app);

struct NetworkArgs;
// Builds a network by architecture name through the plugin registry (PluginCommands.cpp).
// unet3d takes --base/--depth/--norm from `net`; every architecture takes its channel counts
// from `net` (data channels, --classes); `optionsJson` (JSON object or a file) overrides the rest.
std::shared_ptr<model::StagedNetwork> makeNetwork(const std::string& arch, const std::string& optionsJson,
                                                  const NetworkArgs& net);
std::string networkOptionsJson(const std::string& arch, const std::string& optionsJson, const NetworkArgs& net);
#ifdef SPLITSEG_WITH_ITK
void addVolumeCommands(CLI::App& app);   // info, import-invesalius (VolumeCommands.cpp)
#endif

} // namespace splitseg::cli
