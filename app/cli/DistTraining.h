#pragma once
// Ranks from the command line: the other ranks (`worker`, or `train`/`infer` with RANK > 0 as
// torchrun starts them) and `launch`, which starts N local ranks with torchrun's environment.
// Rank 0 is `train`/`infer` through the run launcher (core/launch). (DistCommands.cpp)
#include "core/data/SampleSource.h"
#include "core/ranks/RankEnv.h"
#include "core/ranks/RankRun.h"
#include "core/model/StagedNetwork.h"
#include "core/run/RunSpec.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace splitseg::cli {

// Any other rank: joins, receives the run from rank 0, trains its stages or serves inference.
void runAsWorker(const ranks::RankEnv& env, int timeoutSeconds);
// The rank timeout: the flag when given, else SPLITSEG_RANK_TIMEOUT (what launch passes every
// rank), else `value` (the run's, or 120 s for a worker that has no run yet).
int rankTimeout(int value, bool flagGiven);
using ranks::dropRanks;  // core/ranks/RankRun.h
// --rank-interface IFACE[,IFACE]: the interfaces the ranks' transport uses (GLOO_SOCKET_IFNAME);
// --rank-sealing on|off|auto: tensors between ranks encrypted and authenticated.
void addRankNetworkOptions(CLI::App& cmd);

void addDistCommands(CLI::App& app);  // launch, worker, secret

} // namespace splitseg::cli
