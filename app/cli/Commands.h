#pragma once
// Each group of subcommands lives in its own file and registers itself on the app.
#include <CLI/CLI.hpp>

namespace splitseg::cli {

void addDeviceCommands(CLI::App& app);   // devices
void addTrainCommands(CLI::App& app);    // train
void addInferCommands(CLI::App& app);    // infer
void addBenchCommands(CLI::App& app);    // bench
void addPlanCommands(CLI::App& app);     // plan (PlanCommand.cpp)
#ifdef SPLITSEG_WITH_ITK
void addVolumeCommands(CLI::App& app);   // info, import-invesalius (VolumeCommands.cpp)
#endif

} // namespace splitseg::cli
