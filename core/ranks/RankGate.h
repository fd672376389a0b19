#pragma once
// Rank 0's door to the rendezvous store. The store itself listens on 127.0.0.1 only; the gate
// listens where the other ranks reach rank 0, admits a connection once it proves the run secret
// (GateProtocol), and relays it to the store, encrypted. Every refusal is one line naming the
// address it came from; a refused process has read nothing and written nothing.
#include "core/ranks/GateProtocol.h"

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace splitseg::ranks {

class RankGate {
public:
  // Listens on address:port (port 0: any free one); when it cannot, listening() is false and
  // listenError() says why (the caller words the line). `onRefused` gets each refusal line.
  RankGate(std::string secret, const std::string& address, int port, int storePort,
           std::function<void(const std::string&)> onRefused);
  ~RankGate();
  RankGate(const RankGate&) = delete;
  RankGate& operator=(const RankGate&) = delete;

  bool listening() const { return listenFd_ >= 0; }
  const std::string& listenError() const { return listenError_; }
  int port() const { return port_; }
  std::vector<std::string> refusals() const;

private:
  void acceptLoop();
  void serve(int fd);
  void refuse(const std::string& line);

  std::string secret_;
  int storePort_;
  int listenFd_ = -1;
  int port_ = 0;
  std::string listenError_;
  std::function<void(const std::string&)> onRefused_;
  mutable std::mutex mutex_;
  std::vector<std::string> refusals_;
  gate::ConnectionThreads connections_;
  std::thread acceptor_;
};

} // namespace splitseg::ranks
