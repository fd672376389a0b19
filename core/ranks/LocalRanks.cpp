#include "core/ranks/LocalRanks.h"

#include "core/engine/Devices.h"

#include <cstdlib>

namespace splitseg::ranks {

std::vector<std::pair<std::string, std::string>> localRankEnvironment(const LocalRankSpec& s, const char* inheritedLogLevel) {
  std::vector<std::pair<std::string, std::string>> env{
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(s.port)},
      {"RANK", std::to_string(s.rank)},
      {"LOCAL_RANK", std::to_string(s.rank)},
      {"WORLD_SIZE", std::to_string(s.worldSize)},
      {"LOCAL_WORLD_SIZE", std::to_string(s.ranksOnThisHost)},
      {"SPLITSEG_RANK_TIMEOUT", std::to_string(s.timeoutSeconds)},
      {"SPLITSEG_RUN_SECRET", s.secret},
      // Ranks on one machine share its cores (as torchrun does): OpenMP threads that spin on cores
      // another rank computes on slow both down. The planner plans each rank with these threads.
      {"OMP_NUM_THREADS", std::to_string(engine::rankThreads(s.ranksOnThisHost))},
  };
  // c10d logs each lost connection with a stack trace; the ranks' own one-line messages say it.
  const char* level = inheritedLogLevel ? inheritedLogLevel : std::getenv("TORCH_CPP_LOG_LEVEL");
  if (!level || !*level) env.emplace_back("TORCH_CPP_LOG_LEVEL", "ERROR");
  return env;
}

} // namespace splitseg::ranks

#include "core/base/Error.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace splitseg::ranks {

namespace {
// environ with `extra` set over it, as "NAME=value" strings (built before fork: the child only execs).
std::vector<std::string> mergedEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    bool replaced = false;
    for (const auto& [n, v] : extra) replaced = replaced || n == name;
    if (!replaced) out.push_back(entry);
  }
  for (const auto& [n, v] : extra) out.push_back(n + "=" + v);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}
} // namespace

std::string LocalRankProcesses::Ended::describe() const {
  return "rank " + std::to_string(rank) +
         (signal != 0 ? " was killed by signal " + std::to_string(signal) : " exited with status " + std::to_string(exitCode));
}

LocalRankProcesses::~LocalRankProcesses() { killAll(); }

void LocalRankProcesses::start(const std::string& program, const std::vector<std::string>& args,
                               const std::vector<LocalRankSpec>& ranks, bool captureStderr, int nice) {
  for (const auto& spec : ranks) {
    auto envStrings = mergedEnvironment(localRankEnvironment(spec));
    std::vector<std::string> argvStrings{program};
    argvStrings.insert(argvStrings.end(), args.begin(), args.end());
    auto envp = pointers(envStrings);
    auto argv = pointers(argvStrings);
    int err[2] = {-1, -1}, status[2] = {-1, -1};
    if (captureStderr && pipe2(err, O_CLOEXEC) != 0) throw Error("cannot start rank " + std::to_string(spec.rank) + ": no pipe");
    if (pipe2(status, O_CLOEXEC) != 0) throw Error("cannot start rank " + std::to_string(spec.rank) + ": no pipe");
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      killAll();
      throw Error("cannot start rank " + std::to_string(spec.rank) + ": " + std::strerror(errno));
    }
    if (pid == 0) {
      // Only async-signal-safe calls until exec.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the launcher died before the line above
      if (nice != 0) setpriority(PRIO_PROCESS, 0, nice);
      if (captureStderr) dup2(err[1], STDERR_FILENO);
      execve(program.c_str(), argv.data(), envp.data());
      const int e = errno;
      (void)!write(status[1], &e, sizeof e);
      _exit(127);
    }
    close(status[1]);
    int execErrno = 0;
    const bool execFailed = read(status[0], &execErrno, sizeof execErrno) == static_cast<ssize_t>(sizeof execErrno);
    close(status[0]);
    Child child;
    child.pid = pid;
    if (captureStderr) {
      close(err[1]);
      child.stderrFd = err[0];
      fcntl(child.stderrFd, F_SETFL, fcntl(child.stderrFd, F_GETFL) | O_NONBLOCK);
    }
    children_[spec.rank] = std::move(child);
    if (execFailed) {
      killAll();
      throw Error("rank " + std::to_string(spec.rank) + " did not start (" + program + "): " + std::strerror(execErrno));
    }
  }
}

void LocalRankProcesses::readStderr(Child& c) {
  if (c.stderrFd < 0) return;
  char buffer[4096];
  ssize_t n;
  while ((n = read(c.stderrFd, buffer, sizeof buffer)) > 0) c.pending.append(buffer, static_cast<std::size_t>(n));
  // The last complete non-empty line, and what follows it once the process is gone.
  std::size_t start = 0, nl;
  while ((nl = c.pending.find('\n', start)) != std::string::npos) {
    std::string line = c.pending.substr(start, nl - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) c.lastLine = line;
    start = nl + 1;
  }
  c.pending.erase(0, start);
  if (c.pending.size() > 65536) c.pending.erase(0, c.pending.size() - 65536);  // a line without end stays bounded
}

std::vector<LocalRankProcesses::Ended> LocalRankProcesses::poll() {
  std::vector<Ended> ended;
  for (auto it = children_.begin(); it != children_.end();) {
    auto& c = it->second;
    readStderr(c);
    int ws = 0;
    if (waitpid(c.pid, &ws, WNOHANG) != c.pid) {
      ++it;
      continue;
    }
    readStderr(c);
    Ended e;
    e.rank = it->first;
    if (WIFSIGNALED(ws)) e.signal = WTERMSIG(ws), e.exitCode = 128 + e.signal;
    else e.exitCode = WEXITSTATUS(ws);
    e.lastLine = c.pending.empty() ? c.lastLine : c.pending;
    if (c.stderrFd >= 0) close(c.stderrFd);
    ended.push_back(std::move(e));
    it = children_.erase(it);
  }
  return ended;
}

void LocalRankProcesses::signalAll(int signal) {
  for (auto& [rank, c] : children_) kill(c.pid, signal);
}

void LocalRankProcesses::killAll() {
  for (auto& [rank, c] : children_) kill(c.pid, SIGKILL);
  for (auto& [rank, c] : children_) {
    waitpid(c.pid, nullptr, 0);
    if (c.stderrFd >= 0) close(c.stderrFd);
  }
  children_.clear();
}

pid_t LocalRankProcesses::pidOf(int rank) const {
  const auto it = children_.find(rank);
  return it == children_.end() ? 0 : it->second.pid;
}

} // namespace splitseg::ranks
