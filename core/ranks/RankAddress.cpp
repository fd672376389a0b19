#include "core/ranks/RankAddress.h"
#include "core/base/Printable.h"
#include "core/ranks/RankError.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace splitseg::ranks {

namespace {
// Each IPv4 interface with its address.
std::vector<std::pair<std::string, std::string>> interfaces() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    out.emplace_back(i->ifa_name, text);
  }
  freeifaddrs(list);
  return out;
}

bool loopbackText(const std::string& a) { return a.rfind("127.", 0) == 0; }

// The local address the kernel picks to reach `host` (a UDP connect sends nothing).
std::string routeTo(const std::string& host, std::string& resolved, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int g = getaddrinfo(host.c_str(), "9", &hints, &found); g != 0) {
    error = "MASTER_ADDR=" + printable(host) + " does not resolve: " + gai_strerror(g);
    return {};
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
  resolved = text;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool ok = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  freeaddrinfo(found);
  if (fd >= 0) close(fd);
  if (!ok) {
    error = "no route to MASTER_ADDR=" + printable(host) + " (" + resolved + "): " + std::strerror(err);
    return {};
  }
  inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}
} // namespace

bool RankAddress::loopback() const { return loopbackText(address); }

std::string RankAddress::describe() const {
  return address + " (" + interface + (named ? ", named in GLOO_SOCKET_IFNAME" : ", the route to MASTER_ADDR") + ")";
}

bool allRanksOnThisHost(const RankEnv& env) {
  return env.masterAddr == "localhost" || loopbackText(env.masterAddr) ||
         (env.localWorldSize > 0 && env.localWorldSize == env.worldSize);
}

std::string interfaceList() {
  std::string out;
  for (const auto& [name, address] : interfaces()) out += (out.empty() ? "" : ", ") + name + " " + address;
  return out.empty() ? "none" : out;
}

RankAddress chooseRankAddress(const RankEnv& env) {
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  const auto all = interfaces();
  RankAddress a;
  std::string resolved;
  if (!env.interfaces.empty()) {
    a.named = true;
    for (const auto& name : env.interfaces) {
      std::string address;
      for (const auto& [n, ip] : all)
        if (n == name && address.empty()) address = ip;
      if (address.empty())
        throw RankError(who + "GLOO_SOCKET_IFNAME names " + printable(name) +
                        ", which has no IPv4 address on this host (it has: " + interfaceList() + ")");
      if (a.address.empty()) {
        a.address = address;
        a.interface = name;
      }
      a.interfaces.push_back(name);
    }
  } else if (env.masterAddr == "localhost" || loopbackText(env.masterAddr)) {
    a.address = "127.0.0.1";
    a.interface = "lo";
  } else {
    std::string error;
    a.address = routeTo(env.masterAddr, resolved, error);
    if (a.address.empty()) throw RankError(who + error);
    for (const auto& [n, ip] : all)
      if (ip == a.address && a.interface.empty()) a.interface = n;
    if (a.interface.empty()) a.interface = "?";
  }
  if (a.interfaces.empty()) a.interfaces.push_back(a.interface);
  if (a.loopback() && !allRanksOnThisHost(env))
    throw RankError(who + (a.named ? "GLOO_SOCKET_IFNAME names " + a.interface + ", a loopback interface,"
                                   : "MASTER_ADDR=" + printable(env.masterAddr) + " resolves to " + resolved +
                                         " here, so this rank") +
                    " would offer " + a.address + " (" + a.interface +
                    ") to ranks on other hosts. Set MASTER_ADDR to this host's address on the link, or name the "
                    "link's interface with GLOO_SOCKET_IFNAME or --rank-interface (this host has: " +
                    interfaceList() + ")");
  return a;
}

} // namespace splitseg::ranks
