#pragma once
// Each group of subcommands lives in its own file and registers itself on the app.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace splitseg::cli {

void addDeviceCommands(CLI::App& app);   // devices
void addTrainCommands(CLI::App& app);    // train
void addInferCommands(CLI::App& app);    // infer
void addBenchCommands(CLI::App& app);    // bench
void addPlanCommands(CLI::App& app);     // plan (PlanCommand.cpp)
void addPluginCommands(CLI::App& app);   // plugins (PluginCommands.cpp)
void addExportCommands(CLI::App& app);   // export (ExportCommands.cpp)
// session show|save (SessionCommands.cpp); --session on train/infer comes with RunOptions
void addSessionCommands(CLI::App& app);
void addDistCommands(CLI::App& app);    // launch, worker (DistCommands.cpp)

#ifdef SPLITSEG_WITH_ITK
void addVolumeCommands(CLI::App& app);   // info, import-invesalius (VolumeCommands.cpp)
#endif

} // namespace splitseg::cli
