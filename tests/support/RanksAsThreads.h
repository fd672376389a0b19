#pragma once
// For suites that run several ranks as threads of one process, each with its own c10d group.
#include "core/ranks/Comm.h"
#include "core/ranks/RankEnv.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace splitseg::checks {

// Turns off c10d's flight recorder (a process-wide debugging trace) before the first group is made.
// In torch 2.11 its recordWithResetEnabled inserts into a map of group states outside its mutex, so
// two groups of one process starting collectives at once on two threads can corrupt it: SIGSEGV
// in SpatialTrainingTest on CI, reproducible with a second copy of the test running beside it. splitseg-cli runs one group per process and keeps the recorder.
inline void allowRanksAsThreads() { ::setenv("TORCH_FR_BUFFER_SIZE", "0", 1); }

// Runs `body(comm, rank)` for ranks 0..worldSize-1, rank 0 on this thread and the others on their
// own, each with a Comm joined on a free port of 127.0.0.1. Returns each rank's exception message
// ("" where it returned).
// `sealing`: RankEnv::tensorSealing of every rank.
inline std::vector<std::string> runRanksAsThreads(int worldSize, const std::function<void(ranks::Comm&, int)>& body,
                                                  std::chrono::seconds timeout = std::chrono::seconds(30),
                                                  const std::string& sealing = "auto") {
  const int port = ranks::freeLocalPort();
  std::vector<std::string> failures(static_cast<std::size_t>(worldSize));
  auto rank = [&](int r) {
    try {
      ranks::RankEnv env;
      env.masterPort = port;
      env.rank = r;
      env.worldSize = worldSize;
      env.secret = "a test run's secret, 32 characters";
      env.tensorSealing = sealing;
      ranks::Comm comm(env, "test", timeout);
      comm.startGroup(timeout);
      body(comm, r);
    } catch (const std::exception& e) {
      failures[static_cast<std::size_t>(r)] = e.what();
    }
  };
  std::vector<std::thread> others;
  for (int r = 1; r < worldSize; ++r) others.emplace_back(rank, r);
  rank(0);
  for (auto& t : others) t.join();
  return failures;
}

} // namespace splitseg::checks
