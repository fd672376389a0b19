#pragma once
// The wire between RankGate (rank 0) and GateTunnel (the other ranks): a mutual HMAC-SHA256
// challenge over the run secret, then the rendezvous store's bytes relayed in AES-256-GCM frames.
// A process that does not know the secret gets 40 random bytes and a closed connection.
#include "core/ranks/RunSecret.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

namespace splitseg::ranks::gate {

// How long a connection may take to prove the secret before the gate drops it.
constexpr std::chrono::milliseconds kHandshakeLimit{5000};

struct Keys {
  Digest send{}, receive{};
};

// Each returns "" when the other side proved the secret, else why not (one clause). A readable
// `stopFd` ends the wait (the owner is shutting down).
std::string answerAsGate(int fd, const std::string& secret, Keys& keys, int stopFd = -1);
std::string proveToGate(int fd, const std::string& secret, Keys& keys, int stopFd = -1);

// Relays until either side closes, a frame fails authentication, or `stopFd` becomes readable.
// Closes both descriptors.
void relay(int plainFd, int sealedFd, const Keys& keys, int stopFd);

// A listening TCP socket on `address` (IPv4 text) and `port` (0: any); -1 with `error` set.
int listenOn(const std::string& address, int port, std::string& error);
// Connects to host:port (resolving a name), retrying refusals until `limit`; -1 with `error` set.
int connectTo(const std::string& host, int port, std::chrono::milliseconds limit, std::string& error);
int boundPort(int fd);
std::string peerName(int fd);  // "10.0.0.3:41822"

// The threads of one gate or tunnel: each connection is served on its own, and all end when the
// owner is destroyed (a pipe every poll watches), so a silent peer never blocks another.
class ConnectionThreads {
public:
  ConnectionThreads();
  ~ConnectionThreads();  // stops and waits for every thread
  ConnectionThreads(const ConnectionThreads&) = delete;
  ConnectionThreads& operator=(const ConnectionThreads&) = delete;
  int stopFd() const { return stop_[0]; }
  // False (and nothing runs) when `limit` threads are busy already.
  bool run(std::function<void()> work, int limit);
  // Accepts on `listenFd` until stopped: each connection is served on its own thread, or given to
  // `busy` (which closes it) when `limit` are being served.
  void serveEach(int listenFd, int limit, const std::function<void(int)>& serve, const std::function<void(int)>& busy);
  void stop();

private:
  int stop_[2] = {-1, -1};
  std::mutex mutex_;
  std::condition_variable idle_;
  int active_ = 0;
  bool stopped_ = false;
};

} // namespace splitseg::ranks::gate
