#include "core/ranks/RankEnv.h"
#include "core/base/Error.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace splitseg::ranks {

namespace {
int intVar(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || v[used] != '\0' || value < lo || value > hi)
    throw InvalidArgument(std::string(name) + "=" + v + " is not a whole number in " + std::to_string(lo) + ".." +
                          std::to_string(hi));
  return static_cast<int>(value);
}
} // namespace

RankEnv RankEnv::fromEnvironment() {
  RankEnv e;
  e.worldSize = intVar("WORLD_SIZE", 1, 1, 4096);
  e.rank = intVar("RANK", 0, 0, 4095);
  e.localRank = intVar("LOCAL_RANK", 0, 0, 4095);
  e.masterPort = intVar("MASTER_PORT", 29500, 1, 65535);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.masterAddr = a;
  if (e.rank >= e.worldSize)
    throw InvalidArgument("RANK=" + std::to_string(e.rank) + " is not below WORLD_SIZE=" + std::to_string(e.worldSize));
  e.localWorldSize = intVar("LOCAL_WORLD_SIZE", 0, 0, 4096);
  if (e.localWorldSize > e.worldSize)
    throw InvalidArgument("LOCAL_WORLD_SIZE=" + std::to_string(e.localWorldSize) + " is more than WORLD_SIZE=" + std::to_string(e.worldSize));
  return e;
}

std::string RankEnv::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) + " (rendezvous " + masterAddr + ":" +
         std::to_string(masterPort) + ")";
}

int freeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

} // namespace splitseg::ranks
