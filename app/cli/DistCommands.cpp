#include "app/cli/CliSupport.h"
#include "core/base/JsonText.h"
#include "app/cli/Commands.h"
#include "app/cli/DistTraining.h"
#include "core/base/Error.h"
#include "core/dist/Comm.h"
#include "core/dist/PipelineTrainer.h"
#include "core/dist/RankRun.h"
#include "core/dist/SpatialTrainer.h"
#include "core/engine/Devices.h"
#include "core/placement/Placement.h"
#include "core/plugin/PluginRegistry.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

namespace splitseg::cli {

namespace {
std::chrono::milliseconds seconds(int s) { return std::chrono::milliseconds(std::int64_t(s) * 1000); }
} // namespace

void trainAsRankZero(const dist::RankEnv& env, run::RunSpec spec, std::shared_ptr<model::StagedNetwork> net,
                     std::shared_ptr<data::SampleSource> source, const std::string& resume, const std::string& progress,
                     const std::map<std::string, std::int64_t>& planned, const std::string& planNote) {
  CliMetrics metrics(progress, planned, planNote);
  dist::trainAsRankZero(env, std::move(spec), std::move(net), std::move(source), resume, &metrics, nullptr,
                        [&](const std::string& line) {
                          if (progress == "bar") std::cerr << line << "\n";
                        });
}

void runAsWorker(const dist::RankEnv& env, int timeoutSeconds) {
  dist::Comm comm(env, dist::rankIdentity(), seconds(timeoutSeconds));
  nlohmann::json message = nlohmann::json::object();
  std::string problem;
  run::RunSpec spec;
  std::shared_ptr<model::StagedNetwork> net;
  try {
    message = parseJson(comm.fetch("run"), "rank 0's run message", dist::kRankMessageLimits);
    if (!message.is_object() || !message.contains("run")) throw FormatError("rank 0", "an unreadable run description");
    spec = run::RunSpec::fromJson(message.at("run"));
    torch::manual_seed(spec.seed);
    net = plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
    problem = dist::rankProblem(spec, net->stageNames(), env.rank, env.worldSize);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  comm.agree("ready", problem);
  comm.startGroup(seconds(spec.rankTimeoutSeconds));
  const bool spatial = dist::SpatialTrainer::applies(spec.resolvePlacement(net->stageNames(), "cpu"), env.worldSize);
  if (message.value("mode", std::string("train")) == "infer") {
    dist::serveInference(comm, net, spec);
    return;
  }
  if (spatial) {
    dist::SpatialTrainer trainer(comm, net, nullptr, spec);
    if (message.value("resume", false)) trainer.loadCheckpoint("");
    trainer.run(nullptr);
    return;
  }
  dist::PipelineTrainer trainer(comm, net, nullptr, spec);
  if (message.value("resume", false)) trainer.loadCheckpoint("");
  trainer.run(nullptr);
}

int rankTimeout(int value, bool flagGiven) {
  if (flagGiven) return value;
  if (const char* s = std::getenv("SPLITSEG_RANK_TIMEOUT"); s && *s) return std::max(1, std::atoi(s));
  return value;
}

namespace {
struct LaunchArgs {
  int ranks = 2;
  int port = 0;
  int timeout = 120;
};

int freePort() {
  const int port = dist::freeLocalPort();
  if (port <= 0) throw Error("launch: no free port on 127.0.0.1");
  return port;
}

// Starts `ranks` copies of this program with torchrun's environment and the given arguments, then
// waits. When one rank fails, the others get the rank timeout (plus a margin) to stop by
// themselves before they are killed. Exit status: the first failing rank's, else 0.
int launch(const LaunchArgs& a, const std::vector<std::string>& args) {
  if (args.empty() || (args.front() != "train" && args.front() != "infer"))
    throw InvalidArgument("launch: give the command the ranks run (train or infer), e.g. launch --local-ranks 2 train "
                          "--synthetic 32 ...");
  const int port = a.port > 0 ? a.port : freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < a.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw Error("launch: cannot start rank " + std::to_string(r));
    if (pid == 0) {
      // A rank does not outlive its launcher (killed, or a test that gave up): no orphan keeps training.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() == 1) _exit(1);  // the launcher died before the line above
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(a.ranks).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(a.ranks).c_str(), 1);
      setenv("SPLITSEG_RANK_TIMEOUT", std::to_string(a.timeout).c_str(), 1);
      // Ranks on one machine share its cores (as torchrun does): OpenMP threads that spin on cores
      // another rank computes on slow both down.
      // The planner plans each rank's CPU with these threads (engine::rankThreads).
      setenv("OMP_NUM_THREADS", std::to_string(engine::rankThreads(a.ranks)).c_str(), 1);
      // c10d logs each lost connection with a stack trace; the ranks' own one-line messages say it.
      setenv("TORCH_CPP_LOG_LEVEL", "ERROR", 0);
      std::vector<std::string> argv{"splitseg-cli"};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> cargv;
      for (auto& s : argv) cargv.push_back(s.data());
      cargv.push_back(nullptr);
      execv("/proc/self/exe", cargv.data());
      std::perror("launch: exec");
      _exit(127);
    }
    pids.push_back(pid);
    std::cerr << "launch: rank " << r << " pid " << pid << " (127.0.0.1:" << port << ")" << std::endl;
  }
  int status = 0, running = a.ranks;
  std::chrono::steady_clock::time_point deadline{};
  while (running > 0) {
    int ws = 0;
    const pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      --running;
      const auto it = std::find(pids.begin(), pids.end(), pid);
      const int rank = static_cast<int>(it - pids.begin());
      const int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
      if (code != 0) {
        std::cerr << "launch: rank " << rank << " "
                  << (WIFEXITED(ws) ? "exited with status " + std::to_string(code)
                                    : "was killed by signal " + std::to_string(WTERMSIG(ws)))
                  << std::endl;
        if (status == 0) {
          status = code;
          deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout + 10);
        }
      }
      continue;
    }
    if (status != 0 && std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : pids) kill(p, SIGKILL);
      std::cerr << "launch: ranks still running " << a.timeout + 10 << " s after a failure were killed" << std::endl;
      deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}
} // namespace

void addDistCommands(CLI::App& app) {
  auto a = std::make_shared<LaunchArgs>();
  auto* launchCmd = app.add_subcommand(
      "launch", "start N local ranks (torchrun's environment) running the command that follows, e.g. "
                "launch --local-ranks 2 train --synthetic 32 --placement enc0=r0:cpu,dec0=r1:cpu");
  launchCmd->add_option("--local-ranks", a->ranks, "ranks to start on this machine")->check(CLI::Range(1, 64));
  launchCmd->add_option("--port", a->port, "rendezvous port on 127.0.0.1 (default: a free one)")
      ->check(CLI::Range(1, 65535));
  launchCmd->add_option("--rank-timeout", a->timeout, "seconds a rank waits for another (default 120)")
      ->check(CLI::Range(1, 86400));
  launchCmd->prefix_command();
  launchCmd->callback([a, launchCmd] {
    const int status = launch(*a, launchCmd->remaining());
    if (status != 0) std::exit(status);
  });

  auto timeout = std::make_shared<int>(120);
  auto* worker = app.add_subcommand("worker", "join a run over ranks as RANK (torchrun's environment); the run "
                                              "comes from rank 0");
  worker->add_option("--rank-timeout", *timeout, "seconds to wait for rank 0 and the others (default: "
                                                 "SPLITSEG_RANK_TIMEOUT or 120)")
      ->check(CLI::Range(1, 86400));
  worker->callback([timeout, worker] {
    const auto env = dist::RankEnv::fromEnvironment();
    if (env.rank == 0) throw InvalidArgument("worker: RANK=0 is the rank that starts the run (splitseg-cli train)");
    runAsWorker(env, rankTimeout(*timeout, worker->count("--rank-timeout") > 0));
  });
}

} // namespace splitseg::cli
