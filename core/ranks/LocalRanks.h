#pragma once
// The one local-rank launcher: rank processes on this machine with torchrun's variables for a
// rendezvous on 127.0.0.1, the run secret, the rank timeout and their share of the cores. `splitseg-cli launch`
// and the workstation's worker processes both start their ranks with it.
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace splitseg::ranks {

struct LocalRankSpec {
  int rank = 0;
  int worldSize = 1;
  int ranksOnThisHost = 1;  // LOCAL_WORLD_SIZE: every rank on this machine shares its cores
  int port = 0;
  int timeoutSeconds = 120;
  std::string secret;  // the run's (RunSecret.h): every rank of one run gets the same
};

// Name and value of each variable. TORCH_CPP_LOG_LEVEL only where `inherited` lacks it (nullptr:
// the caller's environment, getenv).
std::vector<std::pair<std::string, std::string>> localRankEnvironment(const LocalRankSpec& spec,
                                                                      const char* inheritedLogLevel = nullptr);

// Rank processes started here. Each dies with this process (no orphan keeps training); the
// environment is prepared before fork, so starting from a multi-threaded program is safe.
class LocalRankProcesses {
public:
  struct Ended {
    int rank = 0;
    int exitCode = 0;    // when it exited
    int signal = 0;      // when a signal killed it (then exitCode is 128 + signal)
    std::string lastLine;  // its last line on stderr (captured processes only)
    bool failed() const { return exitCode != 0 || signal != 0; }
    std::string describe() const;  // "rank 2 exited with status 1" / "rank 2 was killed by signal 9"
  };

  LocalRankProcesses() = default;
  ~LocalRankProcesses();  // kills those still running
  LocalRankProcesses(const LocalRankProcesses&) = delete;
  LocalRankProcesses& operator=(const LocalRankProcesses&) = delete;

  // Starts `program args...` once per entry of `ranks`, at `nice` (0: as this process). With
  // `captureStderr` each one's stderr is read here (lastLine), else it shares this process's.
  // Throws Error naming the rank that could not start, after stopping the ones started.
  void start(const std::string& program, const std::vector<std::string>& args, const std::vector<LocalRankSpec>& ranks,
             bool captureStderr, int nice = 0);
  // The ranks that ended since the last call; does not block.
  std::vector<Ended> poll();
  void signalAll(int signal);  // poll() reports them as they end
  void killAll();  // SIGKILL, then reaps them
  int running() const { return static_cast<int>(children_.size()); }
  pid_t pidOf(int rank) const;  // 0 when not running

private:
  struct Child {
    pid_t pid = 0;
    int stderrFd = -1;
    std::string pending, lastLine;
  };
  void readStderr(Child& c);
  std::map<int, Child> children_;
};

} // namespace splitseg::ranks
