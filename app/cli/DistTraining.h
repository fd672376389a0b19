#pragma once
// Training over ranks from the command line: rank 0 (`train` with WORLD_SIZE > 1), the other
// ranks (`worker`, or `train` with RANK > 0 as torchrun starts it), and `launch`, which starts N
// local ranks with torchrun's environment. (DistCommands.cpp)
#include "core/data/SampleSource.h"
#include "core/dist/RankEnv.h"
#include "core/dist/RankRun.h"
#include "core/model/StagedNetwork.h"
#include "core/run/RunSpec.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace splitseg::cli {

// Rank 0: sends the run to the others, trains, writes the checkpoint, prints the progress.
// `planned`: each rank's planned peak, printed beside the measured one (CliMetrics).
void trainAsRankZero(const dist::RankEnv& env, run::RunSpec spec, std::shared_ptr<model::StagedNetwork> net,
                     std::shared_ptr<data::SampleSource> source, const std::string& resume, const std::string& progress,
                     const std::map<std::string, std::int64_t>& planned = {}, const std::string& planNote = {});
// Any other rank: joins, receives the run from rank 0, trains its stages or serves inference.
void runAsWorker(const dist::RankEnv& env, int timeoutSeconds);
// The rank timeout: the flag when given, else SPLITSEG_RANK_TIMEOUT (what launch passes every
// rank), else `value` (the run's, or 120 s for a worker that has no run yet).
int rankTimeout(int value, bool flagGiven);
using dist::dropRanks;  // core/dist/RankRun.h

void addDistCommands(CLI::App& app);  // launch, worker

} // namespace splitseg::cli
