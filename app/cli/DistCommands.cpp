#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "app/cli/DistTraining.h"
#include "core/base/Error.h"
#include "core/ranks/Comm.h"
#include "core/ranks/LocalRanks.h"
#include "core/ranks/RunSecret.h"
#include "core/ranks/RankRun.h"
#include "core/engine/Devices.h"
#include "core/placement/Placement.h"

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

void runAsWorker(const ranks::RankEnv& env, int timeoutSeconds) { ranks::serveAsWorker(env, timeoutSeconds); }

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
  const int port = ranks::freeLocalPort();
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
  std::vector<ranks::LocalRankSpec> specs;
  const std::string secret = ranks::makeRunSecret();
  for (int r = 0; r < a.ranks; ++r) specs.push_back({r, a.ranks, a.ranks, port, a.timeout, secret});
  ranks::LocalRankProcesses processes;
  processes.start("/proc/self/exe", args, specs, /*captureStderr=*/false);
  for (int r = 0; r < a.ranks; ++r)
    std::cerr << "launch: rank " << r << " pid " << processes.pidOf(r) << " (127.0.0.1:" << port << ")" << std::endl;
  int status = 0;
  std::chrono::steady_clock::time_point deadline{};
  while (processes.running() > 0) {
    for (const auto& e : processes.poll()) {
      if (!e.failed()) continue;
      std::cerr << "launch: " << e.describe() << std::endl;
      if (status == 0) {
        status = e.exitCode;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout + 10);
      }
    }
    if (status != 0 && processes.running() > 0 && std::chrono::steady_clock::now() > deadline) {
      processes.signalAll(SIGKILL);
      std::cerr << "launch: ranks still running " << a.timeout + 10 << " s after a failure were killed" << std::endl;
      deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}
} // namespace

void addRankNetworkOptions(CLI::App& cmd) {
  cmd.add_option_function<std::string>(
      "--rank-interface", [](const std::string& v) { ::setenv("GLOO_SOCKET_IFNAME", v.c_str(), 1); },
      "network interface(s) the ranks use, a comma list (as GLOO_SOCKET_IFNAME; default: the one that routes to "
      "MASTER_ADDR)");
  cmd.add_option_function<std::string>(
         "--rank-sealing", [](const std::string& v) { ::setenv("SPLITSEG_RANK_SEALING", v.c_str(), 1); },
         "encrypt and authenticate tensors between ranks (AES-256-GCM): on, off, or auto (on when the ranks span "
         "hosts; rank 0 decides for all)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
}

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
  addRankNetworkOptions(*worker);
  worker->callback([timeout, worker] {
    const auto env = ranks::RankEnv::fromEnvironment();
    if (env.rank == 0) throw InvalidArgument("worker: RANK=0 is the rank that starts the run (splitseg-cli train)");
    runAsWorker(env, rankTimeout(*timeout, worker->count("--rank-timeout") > 0));
  });

  app.add_subcommand("secret", "print a new run secret for SPLITSEG_RUN_SECRET (64 hex digits from OpenSSL's "
                               "random generator); give every rank of one run the same")
      ->callback([] { std::cout << ranks::makeRunSecret() << "\n"; });
}

} // namespace splitseg::cli
