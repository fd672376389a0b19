// splitseg-cli: the headless front end of the SplitSeg engine.
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/engine/HostCachingAllocator.h"

#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"SplitSeg: train and run a 3D U-Net split across devices"};
  app.set_version_flag("--version", std::string("splitseg-cli ") + SPLITSEG_VERSION);
  app.require_subcommand(1);
  splitseg::cli::addDeviceCommands(app);
  splitseg::cli::addTrainCommands(app);
  splitseg::cli::addInferCommands(app);
  splitseg::cli::addBenchCommands(app);
  splitseg::cli::addPlanCommands(app);
  splitseg::cli::addPluginCommands(app);
  splitseg::cli::addExportCommands(app);
  splitseg::cli::addSessionCommands(app);
  splitseg::cli::addDistCommands(app);
#ifdef SPLITSEG_WITH_ITK
  splitseg::cli::addVolumeCommands(app);
#endif
  try {
    // Reuses freed CPU tensor memory between steps and windows (SPLITSEG_HOST_CACHE=off disables).
    splitseg::engine::installHostCachingAllocatorFromEnvironment();
    // SPLITSEG_DETERMINISTIC=1: exact fp32 on CUDA (no TF32, deterministic cuDNN algorithms), for
    // comparing runs bit for bit (the GPU kit's ranks check); slower.
    if (const char* d = std::getenv("SPLITSEG_DETERMINISTIC"); d && std::string(d) == "1") {
      auto& c = at::globalContext();
      c.setAllowTF32CuDNN(false);
      c.setAllowTF32CuBLAS(false);
      c.setDeterministicCuDNN(true);
      c.setBenchmarkCuDNN(false);
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const splitseg::Error& e) {
    std::cerr << "splitseg-cli: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "splitseg-cli: LibTorch: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "splitseg-cli: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
