#pragma once
// Where this rank listens and what it tells the others, chosen as torchrun does: the interfaces
// named in GLOO_SOCKET_IFNAME (or --rank-interface), else the address this host uses to reach
// MASTER_ADDR (its route), never merely what the hostname resolves to. A rank that would offer a
// loopback address to ranks on other hosts is refused at once, in one line naming the fix.
#include "core/ranks/RankEnv.h"

#include <string>
#include <vector>

namespace splitseg::ranks {

struct RankAddress {
  std::string address;                  // IPv4 this rank binds and advertises
  std::string interface;                // its interface ("lo", "eth0")
  std::vector<std::string> interfaces;  // the Gloo devices: those named, else `interface`
  bool named = false;                   // from GLOO_SOCKET_IFNAME / --rank-interface
  bool loopback() const;
  std::string describe() const;  // "10.0.0.1 (eth0, the route to MASTER_ADDR)"
};

// Every rank on this host (MASTER_ADDR is a loopback address or "localhost", or LOCAL_WORLD_SIZE
// says all ranks are here): then nothing needs to listen beyond 127.0.0.1.
bool allRanksOnThisHost(const RankEnv& env);

// Throws RankError ("rank 0: ...") when no usable address exists.
RankAddress chooseRankAddress(const RankEnv& env);

// "lo 127.0.0.1, eth0 10.0.0.1": this host's IPv4 interfaces, for messages.
std::string interfaceList();

} // namespace splitseg::ranks
