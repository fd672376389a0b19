#pragma once
// A rank's way to the rendezvous store through rank 0's RankGate: it listens on 127.0.0.1 for this
// process's store client and carries each connection to the gate, proving the run secret and
// encrypting what passes.
#include "core/ranks/GateProtocol.h"

#include <chrono>
#include <string>
#include <thread>

namespace splitseg::ranks {

class GateTunnel {
public:
  // Reaches the gate and proves the secret once before returning, so a wrong secret, an impostor
  // or an unreachable rank 0 is one RankError line here ("rank 1: rank 0 at H:P ...").
  GateTunnel(std::string secret, std::string gateHost, int gatePort, std::chrono::milliseconds timeout, int rank);
  ~GateTunnel();
  GateTunnel(const GateTunnel&) = delete;
  GateTunnel& operator=(const GateTunnel&) = delete;

  int localPort() const { return localPort_; }

private:
  void acceptLoop();
  void carry(int local);

  std::string secret_, host_;
  int gatePort_;
  std::chrono::milliseconds timeout_;
  int listenFd_ = -1;
  int localPort_ = 0;
  gate::ConnectionThreads connections_;
  std::thread acceptor_;
};

} // namespace splitseg::ranks
