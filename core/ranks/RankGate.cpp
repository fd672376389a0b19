#include "core/ranks/RankGate.h"

#include <sys/socket.h>
#include <unistd.h>

namespace splitseg::ranks {

namespace {
// Connections being served at once: the real ranks need one or two each.
constexpr int kMaxConnections = 256;
} // namespace

RankGate::RankGate(std::string secret, const std::string& address, int port, int storePort,
                   std::function<void(const std::string&)> onRefused)
    : secret_(std::move(secret)), storePort_(storePort), onRefused_(std::move(onRefused)) {
  listenFd_ = gate::listenOn(address, port, listenError_);
  if (listenFd_ < 0) return;
  port_ = gate::boundPort(listenFd_);
  acceptor_ = std::thread([this] { acceptLoop(); });
}

RankGate::~RankGate() {
  connections_.stop();
  if (acceptor_.joinable()) acceptor_.join();
  if (listenFd_ >= 0) close(listenFd_);
}

std::vector<std::string> RankGate::refusals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusals_;
}

void RankGate::refuse(const std::string& line) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refusals_.size() < 1000) refusals_.push_back(line);
  }
  if (onRefused_) onRefused_(line);
}

void RankGate::acceptLoop() {
  connections_.serveEach(
      listenFd_, kMaxConnections, [this](int fd) { serve(fd); },
      [this](int fd) {
        refuse("rank 0: refused a connection from " + gate::peerName(fd) + ": too many connections at once");
        close(fd);
      });
}

void RankGate::serve(int fd) {
  const std::string from = gate::peerName(fd);
  gate::Keys keys;
  if (const std::string why = gate::answerAsGate(fd, secret_, keys, connections_.stopFd()); !why.empty()) {
    refuse("rank 0: refused a connection from " + from + ": " + why);
    close(fd);
    return;
  }
  std::string error;
  const int store = gate::connectTo("127.0.0.1", storePort_, std::chrono::milliseconds(2000), error);
  if (store < 0) {
    close(fd);
    return;
  }
  gate::relay(store, fd, keys, connections_.stopFd());
}

} // namespace splitseg::ranks
