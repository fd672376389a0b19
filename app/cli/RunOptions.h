#pragma once
// The command line's one way to fill a run description: flags with the same names and size
// syntax on train, infer and plan (--patch X,Y,Z, --batch, --placement, --precision,
// --recompute, ...). A run starts from the defaults, a --session file or a checkpoint's run;
// the flags the user typed overlay it, typed (no text round trip).
#include "app/cli/CliSupport.h"
#include "core/run/RunSpec.h"

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace splitseg::cli {

class RunOptions {
public:
  void addNetwork(CLI::App& cmd);    // --arch --arch-options --base --depth --norm --classes
  void addExecution(CLI::App& cmd);  // --placement --precision --recompute --cpu-budget --rank-timeout
  void addShape(CLI::App& cmd);      // --patch --batch
  void addSchedule(CLI::App& cmd);   // --steps --epochs --steps-per-epoch --lr --seed --validate-every
                                     // --checkpoint-every --save
  void addData(CLI::App& cmd);       // --synthetic --dataset --image --label --intensity --spacing
  void addSession(CLI::App& cmd);    // --session FILE --print-run

  // The session's run (when --session was given) or `base`, overlaid with the typed flags.
  // Placement, precision and recompute are resolved against the network's stages in
  // applyStages, once the network is known.
  run::RunSpec build(const run::RunSpec& base = {}) const;
  // --recompute all|stages, --placement pairs or JSON file: need the network's stage names.
  void applyStages(run::RunSpec& spec, const std::vector<std::string>& stages) const;
  // The network options JSON the run builds: registry defaults < run's options < flags.
  static nlohmann::json resolvedNetworkOptions(const run::RunSpec& spec);

  const std::string& sessionPath() const { return session_; }
  bool printRun() const { return printRun_; }
  bool given(const std::string& flag) const;

  NetworkArgs net;
  std::string synthetic;  // --synthetic size (also the patch)

private:
  void remember(CLI::Option* o) { options_.push_back(o); }

  std::vector<CLI::Option*> options_;
  std::string arch, archOptions, dataset, image, label, intensity, spacing, placement, precision, recompute;
  std::string patch, cpuBudget, save, session_, shardAxis;
  int batch = 1, epochs = 0, microBatches = 1, rankTimeout = 120;
  bool timeline = false;
  bool offload = false;
  std::string cpuLayout;
  std::int64_t steps = 100, stepsPerEpoch = 50, validateEvery = 0, checkpointEvery = 0;
  double lr = 1e-3;
  std::string lrSchedule;
  std::uint64_t seed = 0;
  bool printRun_ = false;
};

} // namespace splitseg::cli
