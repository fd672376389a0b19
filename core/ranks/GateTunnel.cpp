#include "core/ranks/GateTunnel.h"
#include "core/ranks/RankError.h"

#include <sys/socket.h>
#include <unistd.h>

namespace splitseg::ranks {

GateTunnel::GateTunnel(std::string secret, std::string gateHost, int gatePort, std::chrono::milliseconds timeout,
                       int rank)
    : secret_(std::move(secret)), host_(std::move(gateHost)), gatePort_(gatePort), timeout_(timeout) {
  const std::string who = "rank " + std::to_string(rank) + ": rank 0 at " + host_ + ":" + std::to_string(gatePort_);
  std::string error;
  const int fd = gate::connectTo(host_, gatePort_, timeout_, error);
  if (fd < 0)
    throw RankError("rank " + std::to_string(rank) + ": cannot reach rank 0 at " + host_ + ":" +
                    std::to_string(gatePort_) + " within " + std::to_string(timeout_.count() / 1000) + " s (" + error +
                    "; is it started, with the same MASTER_ADDR and MASTER_PORT?)");
  gate::Keys keys;
  const std::string why = gate::proveToGate(fd, secret_, keys);
  close(fd);
  if (!why.empty()) throw RankError(who + ": " + why);
  listenFd_ = gate::listenOn("127.0.0.1", 0, error);
  if (listenFd_ < 0) throw RankError("rank " + std::to_string(rank) + ": cannot listen on 127.0.0.1: " + error);
  localPort_ = gate::boundPort(listenFd_);
  acceptor_ = std::thread([this] { acceptLoop(); });
}

GateTunnel::~GateTunnel() {
  connections_.stop();
  if (acceptor_.joinable()) acceptor_.join();
  if (listenFd_ >= 0) close(listenFd_);
}

void GateTunnel::acceptLoop() {
  connections_.serveEach(
      listenFd_, 64, [this](int fd) { carry(fd); }, [](int fd) { close(fd); });
}

void GateTunnel::carry(int local) {
  std::string error;
  const int remote = gate::connectTo(host_, gatePort_, timeout_, error);
  gate::Keys keys;
  if (remote < 0 || !gate::proveToGate(remote, secret_, keys, connections_.stopFd()).empty()) {
    // The store client sees its connection close and reports the rank that cannot be reached.
    if (remote >= 0) close(remote);
    close(local);
    return;
  }
  gate::relay(local, remote, keys, connections_.stopFd());
}

} // namespace splitseg::ranks
