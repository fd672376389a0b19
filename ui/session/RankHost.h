#pragma once
// A rank of a run over processes and hosts, as the workstation knows it: a process it starts on
// this machine, or a `splitseg-cli worker` on another machine that joins this one (rank 0, the
// workstation itself, serves the rendezvous; workers connect to it, torchrun's convention). The
// rank's device becomes a placement column named "r<rank>:<device>".
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::ui {

struct RankHost {
  int rank = 1;
  std::string host;            // "" : a process this workstation starts; else the worker's machine
  std::string device = "cpu";  // the device inside the rank's process ("cuda:0")
  std::int64_t totalBytes = 0; // its memory, as declared (remote) or detected (local)

  bool local() const { return host.empty(); }
  std::string deviceName() const { return "r" + std::to_string(rank) + ":" + device; }
  bool operator==(const RankHost& o) const {
    return rank == o.rank && host == o.host && device == o.device && totalBytes == o.totalBytes;
  }
};

// Highest rank a workstation adds (the planner and the pipeline have no limit; a session file
// naming more is refused as hostile).
constexpr int kMaxRanks = 64;

// The line a worker on another machine is started with (torchrun's environment and the run secret).
std::string workerCommand(const std::string& rendezvousHost, int port, int rank, int worldSize,
                          const std::string& secret);

// Session files keep the hosts under view["hosts"]. Reading checks every field (types, ranks
// 1..kMaxRanks once each, a device the placement syntax accepts, host names of letters, digits,
// '.', '-', ':' and '_', memory 0..16 TiB) and throws InvalidArgument naming the entry.
nlohmann::json hostsToJson(const std::vector<RankHost>& hosts);
std::vector<RankHost> hostsFromJson(const nlohmann::json& j);

} // namespace splitseg::ui
