#include "ui/session/RankHost.h"

#include "core/base/Error.h"
#include "core/placement/Placement.h"

#include <cctype>
#include <set>

namespace splitseg::ui {

std::string workerCommand(const std::string& rendezvousHost, int port, int rank, int worldSize,
                          const std::string& secret) {
  return "SPLITSEG_RUN_SECRET=" + secret + " MASTER_ADDR=" + rendezvousHost + " MASTER_PORT=" + std::to_string(port) + " RANK=" + std::to_string(rank) +
         " WORLD_SIZE=" + std::to_string(worldSize) + " splitseg-cli worker";
}

nlohmann::json hostsToJson(const std::vector<RankHost>& hosts) {
  auto out = nlohmann::json::array();
  for (const auto& h : hosts)
    out.push_back({{"rank", h.rank}, {"host", h.host}, {"device", h.device}, {"total_bytes", h.totalBytes}});
  return out;
}

std::vector<RankHost> hostsFromJson(const nlohmann::json& j) {
  if (!j.is_array()) throw InvalidArgument("hosts: expected a list");
  if (j.size() > kMaxRanks) throw InvalidArgument("hosts: more than " + std::to_string(kMaxRanks) + " ranks");
  std::vector<RankHost> out;
  std::set<int> seen;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = "hosts[" + std::to_string(i) + "]";
    if (!e.is_object()) throw InvalidArgument(where + ": expected an object");
    for (auto it = e.begin(); it != e.end(); ++it)
      if (it.key() != "rank" && it.key() != "host" && it.key() != "device" && it.key() != "total_bytes")
        throw InvalidArgument(where + "." + it.key() + ": unknown key");
    RankHost h;
    if (!e.contains("rank") || !e["rank"].is_number_integer()) throw InvalidArgument(where + ".rank: expected an integer");
    const auto rank = e["rank"].get<std::int64_t>();
    if (rank < 1 || rank > kMaxRanks) throw InvalidArgument(where + ".rank: " + std::to_string(rank) + " is not in 1.." + std::to_string(kMaxRanks));
    h.rank = static_cast<int>(rank);
    if (!seen.insert(h.rank).second) throw InvalidArgument(where + ".rank: rank " + std::to_string(h.rank) + " twice");
    if (e.contains("host")) {
      if (!e["host"].is_string()) throw InvalidArgument(where + ".host: expected text");
      h.host = e["host"].get<std::string>();
      if (h.host.size() > 253) throw InvalidArgument(where + ".host: longer than a host name can be");
      for (const char c : h.host)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_'))
          throw InvalidArgument(where + ".host: not a host name or address");
    }
    if (!e.contains("device") || !e["device"].is_string()) throw InvalidArgument(where + ".device: expected text");
    const auto device = e["device"].get<std::string>();
    if (device.size() > 32) throw InvalidArgument(where + ".device: too long");
    h.device = placement::canonicalDevice(device);  // throws naming what it expected
    if (placement::splitRank(h.device).rank >= 0) throw InvalidArgument(where + ".device: names a rank itself");
    if (e.contains("total_bytes")) {
      if (!e["total_bytes"].is_number_integer()) throw InvalidArgument(where + ".total_bytes: expected an integer");
      const auto bytes = e["total_bytes"].get<std::int64_t>();
      if (bytes < 0 || bytes > (std::int64_t(16) << 40)) throw InvalidArgument(where + ".total_bytes: not in 0..16 TiB");
      h.totalBytes = bytes;
    }
    out.push_back(h);
  }
  return out;
}

} // namespace splitseg::ui
