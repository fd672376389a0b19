#include "app/cli/CliSupport.h"
#include "core/run/RunSpec.h"
#include "app/cli/Commands.h"
#include "core/base/Units.h"
#include "core/engine/Devices.h"
#include "core/engine/Trainer.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace splitseg::cli {

namespace {
struct BenchArgs {
  NetworkArgs net;
  std::string size = "64";
  int batch = 1;
  int warmup = 2;
  int repeats = 5;
  std::string placement;
  std::string precision = "fp32";
  bool json = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void runBench(const BenchArgs& a) {
  auto net = std::shared_ptr<model::StagedNetwork>(model::UNet3d(a.net.options()).ptr());
  auto placement = placement::Placement::parse(a.placement, net->stageNames(), engine::runnableDeviceNames().front());
  run::RunSpec o;
  o.steps = a.warmup + a.repeats;
  o.batch = a.batch;
  o.patch = run::parseSize(a.size);
  o.precision = placement::StagePrecisions::parse(a.precision, net->stageNames());
  o.setPlacement(placement);
  engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(a.net.classes), o);
  std::vector<double> times;
  std::map<std::string, std::int64_t> peaks;
  for (int i = 0; i < a.warmup + a.repeats; ++i) {
    auto m = trainer.step();
    if (i < a.warmup) continue;
    times.push_back(m.seconds);
    for (const auto& d : m.memory) peaks[d.device] = std::max(peaks[d.device], d.peak);
  }
  nlohmann::json out{{"median_step_seconds", median(times)}, {"steps", times}, {"placement", placement.describe()},
                     {"size", o.patch}, {"base", a.net.base}, {"precision", a.precision}, {"peak_bytes", peaks},
                     {"parameters", net->parameterCount()}};
  if (a.json) {
    std::cout << out.dump() << "\n";
    return;
  }
  std::printf("training step, U-Net base %lld, %s, batch %d, %s\n", static_cast<long long>(a.net.base),
              a.size.c_str(), a.batch, placement.describe().c_str());
  std::printf("  median %.3f s over %d steps (after %d warm-up)\n", median(times), a.repeats, a.warmup);
  for (const auto& [d, p] : peaks) std::printf("  %-8s peak %s\n", d.c_str(), formatBytes(double(p)).c_str());
}
} // namespace

void addBenchCommands(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "time training steps and measure peak memory per device");
  a->net.add(*cmd);
  cmd->add_option("--patch,--size", a->size, "patch (network input) size N or X,Y,Z")->capture_default_str();
  cmd->add_option("--batch", a->batch, "batch")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "warm-up steps")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "timed steps")->capture_default_str();
  cmd->add_option("--placement", a->placement, "stage=device pairs or a JSON file");
  cmd->add_option("--precision", a->precision, "fp32|bf16, or P:stage,stage (as train)")->capture_default_str();
  cmd->add_flag("--json", a->json, "print JSON");
  cmd->callback([a] { runBench(*a); });
}

} // namespace splitseg::cli
