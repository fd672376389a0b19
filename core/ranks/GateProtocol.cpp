#include "core/ranks/GateProtocol.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace splitseg::ranks::gate {

namespace {
constexpr std::uint8_t kMagic[8] = {'S', 'S', 'G', 'A', 'T', 'E', '0', '1'};
constexpr std::size_t kNonce = 32;
using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before the deadline: 1 done, 0 closed early, -1 timed out, failed or
// stopped (`stopFd` readable; -1: none).
int readExactly(int fd, std::uint8_t* out, std::size_t n, Clock::time_point deadline, int stopFd) {
  std::size_t got = 0;
  while (got < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return -1;
    pollfd p[2] = {{fd, POLLIN, 0}, {stopFd, POLLIN, 0}};
    const int r = poll(p, stopFd >= 0 ? 2 : 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || (stopFd >= 0 && p[1].revents)) return -1;
    const ssize_t k = recv(fd, out + got, n - got, 0);
    if (k == 0) return 0;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return 0;
    }
    got += static_cast<std::size_t>(k);
  }
  return 1;
}

bool writeAll(int fd, const std::uint8_t* data, std::size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, data, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

std::vector<std::uint8_t> both(const std::uint8_t* gateNonce, const std::uint8_t* rankNonce) {
  std::vector<std::uint8_t> v(gateNonce, gateNonce + kNonce);
  v.insert(v.end(), rankNonce, rankNonce + kNonce);
  return v;
}

Keys keysFor(const std::string& secret, const std::vector<std::uint8_t>& nonces, bool gate) {
  const auto toGate = hmacSha256(secret, "splitseg stream to rank 0", nonces);
  const auto fromGate = hmacSha256(secret, "splitseg stream from rank 0", nonces);
  return gate ? Keys{fromGate, toGate} : Keys{toGate, fromGate};
}
} // namespace

std::string answerAsGate(int fd, const std::string& secret, Keys& keys, int stopFd) {
  const auto deadline = Clock::now() + kHandshakeLimit;
  std::uint8_t hello[sizeof kMagic + kNonce];
  std::memcpy(hello, kMagic, sizeof kMagic);
  randomBytes(hello + sizeof kMagic, kNonce);
  if (!writeAll(fd, hello, sizeof hello)) return "it closed the connection at once";
  std::uint8_t answer[kNonce + sizeof(Digest)];
  const int r = readExactly(fd, answer, sizeof answer, deadline, stopFd);
  if (r < 0) return "it did not prove the run's secret within " + std::to_string(kHandshakeLimit.count() / 1000) + " s";
  if (r == 0) return "it closed the connection without proving the run's secret";
  const auto nonces = both(hello + sizeof kMagic, answer);
  const auto expected = hmacSha256(secret, "splitseg rank joins", nonces);
  if (!sameDigest(expected.data(), answer + kNonce)) return "it did not prove the run's secret";
  const auto proof = hmacSha256(secret, "splitseg rank 0 admits", nonces);
  if (!writeAll(fd, proof.data(), proof.size())) return "it closed the connection during the handshake";
  keys = keysFor(secret, nonces, true);
  return {};
}

std::string proveToGate(int fd, const std::string& secret, Keys& keys, int stopFd) {
  const auto deadline = Clock::now() + kHandshakeLimit;
  std::uint8_t hello[sizeof kMagic + kNonce];
  const int r = readExactly(fd, hello, sizeof hello, deadline, stopFd);
  if (r <= 0 || std::memcmp(hello, kMagic, sizeof kMagic) != 0)
    return "it does not answer as a SplitSeg rank 0 (another program on that port?)";
  std::uint8_t answer[kNonce + sizeof(Digest)];
  randomBytes(answer, kNonce);
  const auto nonces = both(hello + sizeof kMagic, answer);
  const auto mac = hmacSha256(secret, "splitseg rank joins", nonces);
  std::memcpy(answer + kNonce, mac.data(), mac.size());
  if (!writeAll(fd, answer, sizeof answer)) return "it closed the connection during the handshake";
  Digest proof{};
  const int p = readExactly(fd, proof.data(), proof.size(), deadline, stopFd);
  if (p == 0) return "it refused this rank: the run secrets differ (SPLITSEG_RUN_SECRET must be the same on every rank)";
  if (p < 0) return "it did not answer the handshake within " + std::to_string(kHandshakeLimit.count() / 1000) + " s";
  if (!sameDigest(proof.data(), hmacSha256(secret, "splitseg rank 0 admits", nonces).data()))
    return "it could not prove the run's secret: it is not this run's rank 0";
  keys = keysFor(secret, nonces, false);
  return {};
}

void relay(int plainFd, int sealedFd, const Keys& keys, int stopFd) {
  SealedStream out(keys.send), in(keys.receive);
  std::vector<std::uint8_t> buffer(SealedStream::kMaxFrame), opened;
  for (;;) {
    pollfd p[3] = {{plainFd, POLLIN, 0}, {sealedFd, POLLIN, 0}, {stopFd, POLLIN, 0}};
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[2].revents) break;
    if (p[0].revents) {
      const ssize_t k = recv(plainFd, buffer.data(), buffer.size(), 0);
      if (k <= 0) break;
      const auto frame = out.seal(buffer.data(), static_cast<std::size_t>(k));
      if (!writeAll(sealedFd, frame.data(), frame.size())) break;
    }
    if (p[1].revents) {
      const ssize_t k = recv(sealedFd, buffer.data(), buffer.size(), 0);
      if (k <= 0) break;
      opened.clear();
      if (!in.open(buffer.data(), static_cast<std::size_t>(k), opened)) break;  // forged or damaged: close
      if (!opened.empty() && !writeAll(plainFd, opened.data(), opened.size())) break;
    }
  }
  close(plainFd);
  close(sealedFd);
}

int listenOn(const std::string& address, int port, std::string& error) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    error = address + " is not an IPv4 address";
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 128) != 0) {
    error = std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int connectTo(const std::string& host, int port, std::chrono::milliseconds limit, std::string& error) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int g = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (g != 0) {
      error = "cannot resolve " + host + ": " + gai_strerror(g);
    } else {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int rc = fd < 0 ? -1 : connect(fd, found->ai_addr, found->ai_addrlen);
      const int err = errno;
      freeaddrinfo(found);
      if (rc == 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      if (fd >= 0) close(fd);
      error = std::strerror(err);
    }
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int boundPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

std::string peerName(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "an unknown address";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
}

ConnectionThreads::ConnectionThreads() {
  if (pipe2(stop_, O_CLOEXEC) != 0) stop_[0] = stop_[1] = -1;
}

ConnectionThreads::~ConnectionThreads() {
  stop();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return active_ == 0; });
  lock.unlock();
  for (int fd : stop_)
    if (fd >= 0) close(fd);
}

bool ConnectionThreads::run(std::function<void()> work, int limit) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_ || active_ >= limit) return false;
    ++active_;
  }
  std::thread([this, work = std::move(work)] {
    try {
      work();
    } catch (...) {
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (--active_ == 0) idle_.notify_all();
  }).detach();
  return true;
}

void ConnectionThreads::serveEach(int listenFd, int limit, const std::function<void(int)>& serve,
                                  const std::function<void(int)>& busy) {
  for (;;) {
    pollfd p[2] = {{listenFd, POLLIN, 0}, {stopFd(), POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    const int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (!run([serve, fd] { serve(fd); }, limit)) busy(fd);
  }
}

void ConnectionThreads::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return;
  stopped_ = true;
  const char c = 1;
  if (stop_[1] >= 0) (void)!write(stop_[1], &c, 1);
}

} // namespace splitseg::ranks::gate
