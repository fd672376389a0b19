#include "core/ranks/RankEnv.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"
#include "core/ranks/GateProtocol.h"
#include "core/ranks/RunSecret.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace splitseg::ranks {

namespace {
bool isSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

long wholeNumber(const std::string& text, const std::string& what, long lo, long hi) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < lo || value > hi)
    throw InvalidArgument(what + "=" + printable(text) + " is not a whole number in " + std::to_string(lo) + ".." +
                          std::to_string(hi));
  return value;
}

int intVar(const char* name, int fallback, int lo, int hi) {
  if (!isSet(name)) return fallback;
  return static_cast<int>(wholeNumber(std::getenv(name), name, lo, hi));
}

std::vector<std::string> commaList(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// Slurm's variables in torchrun's terms; MASTER_ADDR and MASTER_PORT, when set, still win.
void readSlurm(RankEnv& e) {
  e.launcher = "slurm";
  e.worldSize = intVar("SLURM_NTASKS", 1, 1, 4096);
  e.rank = intVar("SLURM_PROCID", 0, 0, 4095);
  e.localRank = intVar("SLURM_LOCALID", 0, 0, 4095);
  const int node = intVar("SLURM_NODEID", 0, 0, 4095);
  if (const char* t = std::getenv("SLURM_TASKS_PER_NODE"); t && *t) e.localWorldSize = slurmTasksOnNode(t, node);
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (!list || !*list) list = std::getenv("SLURM_NODELIST");
  if (!isSet("MASTER_ADDR") && list && *list) e.masterAddr = expandSlurmHostList(list, 1).front();
  // Without MASTER_PORT every task derives the same port from the job id, as PyTorch Lightning's
  // SLURMEnvironment does (15000 + the job id's last four digits).
  if (!isSet("MASTER_PORT") && isSet("SLURM_JOB_ID")) {
    const std::string id = std::getenv("SLURM_JOB_ID");
    const std::string tail = id.size() > 4 ? id.substr(id.size() - 4) : id;
    e.masterPort = 15000 + static_cast<int>(wholeNumber(tail, "SLURM_JOB_ID", 0, 9999));
  }
}
} // namespace

RankEnv RankEnv::fromEnvironment() {
  RankEnv e;
  e.masterPort = intVar("MASTER_PORT", 29500, 1, 65535);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.masterAddr = a;
  if (!isSet("RANK") && isSet("SLURM_PROCID")) {
    readSlurm(e);
  } else {
    e.worldSize = intVar("WORLD_SIZE", 1, 1, 4096);
    e.rank = intVar("RANK", 0, 0, 4095);
    e.localRank = intVar("LOCAL_RANK", 0, 0, 4095);
    e.localWorldSize = intVar("LOCAL_WORLD_SIZE", 0, 0, 4096);
    if (isSet("TORCHELASTIC_RUN_ID") || isSet("TORCHELASTIC_USE_AGENT_STORE")) e.launcher = "torchrun";
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    e.agentStore = agent && std::string(agent) == "True";
    e.restartCount = intVar("TORCHELASTIC_RESTART_COUNT", 0, 0, 1 << 20);
  }
  if (e.rank >= e.worldSize)
    throw InvalidArgument("RANK=" + std::to_string(e.rank) + " is not below WORLD_SIZE=" + std::to_string(e.worldSize));
  if (e.localWorldSize > e.worldSize)
    throw InvalidArgument("LOCAL_WORLD_SIZE=" + std::to_string(e.localWorldSize) + " is more than WORLD_SIZE=" + std::to_string(e.worldSize));
  e.interfaces = interfacesFromEnvironment();
  if (const char* s = std::getenv("SPLITSEG_RANK_SEALING"); s && *s) {
    e.tensorSealing = s;
    if (e.tensorSealing != "on" && e.tensorSealing != "off" && e.tensorSealing != "auto")
      throw InvalidArgument("SPLITSEG_RANK_SEALING=" + printable(s) + ": give on, off or auto");
  }
  e.secret = runSecretFromEnvironment();
  return e;
}

std::vector<std::string> interfacesFromEnvironment() {
  const char* i = std::getenv("GLOO_SOCKET_IFNAME");
  return i && *i ? commaList(i) : std::vector<std::string>{};
}

std::string RankEnv::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) + " (rendezvous " + masterAddr + ":" +
         std::to_string(masterPort) + ")";
}

std::vector<std::string> expandSlurmHostList(const std::string& list, std::size_t limit) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("SLURM_JOB_NODELIST=" + printable(list) + ": " + why);
  };
  std::vector<std::string> out;
  // Split at commas outside brackets, then expand one bracket group at a time.
  std::vector<std::string> pending;
  int depth = 0;
  std::string item;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) throw bad("unbalanced brackets");
    if (c == ',' && depth == 0) {
      if (!item.empty()) pending.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) throw bad("unbalanced brackets");
  if (!item.empty()) pending.push_back(item);
  for (std::size_t i = 0; i < pending.size() && out.size() < limit; ++i) {
    const std::string name = pending[i];
    const auto open = name.find('[');
    if (open == std::string::npos) {
      out.push_back(name);
      continue;
    }
    const auto close = name.find(']', open);
    const std::string prefix = name.substr(0, open), suffix = name.substr(close + 1);
    std::vector<std::string> expanded;
    for (const auto& range : commaList(name.substr(open + 1, close - open - 1))) {
      const auto dash = range.find('-');
      const std::string first = range.substr(0, dash), last = dash == std::string::npos ? first : range.substr(dash + 1);
      long lo = 0, hi = 0;
      try {
        lo = wholeNumber(first, "a host range", 0, 99999999);
        hi = wholeNumber(last, "a host range", lo, 99999999);
      } catch (const InvalidArgument& e) {
        throw bad(e.what());
      }
      for (long n = lo; n <= hi && expanded.size() < limit; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');  // "gpu[01-03]"
        expanded.push_back(prefix + digits + suffix);
      }
    }
    if (expanded.empty()) throw bad("an empty range");
    pending.insert(pending.begin() + static_cast<std::ptrdiff_t>(i) + 1, expanded.begin(), expanded.end());
  }
  if (out.empty()) throw bad("no host");
  if (out.size() > limit) out.resize(limit);
  return out;
}

int slurmTasksOnNode(const std::string& tasksPerNode, int node) {
  int seen = 0;
  for (const auto& group : commaList(tasksPerNode)) {
    const auto x = group.find("(x");
    const long tasks = wholeNumber(group.substr(0, x), "SLURM_TASKS_PER_NODE", 1, 4096);
    long times = 1;
    if (x != std::string::npos) {
      if (group.back() != ')') return 0;
      times = wholeNumber(group.substr(x + 2, group.size() - x - 3), "SLURM_TASKS_PER_NODE", 1, 1 << 20);
    }
    if (node < seen + times) return static_cast<int>(tasks);
    seen += static_cast<int>(times);
  }
  return 0;
}

int freeLocalPort() {
  std::string error;
  const int fd = gate::listenOn("127.0.0.1", 0, error);
  if (fd < 0) return 0;
  const int port = gate::boundPort(fd);
  close(fd);
  return port;
}

} // namespace splitseg::ranks
