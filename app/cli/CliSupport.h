#pragma once
// Shared pieces of the CLI: progress/metrics printers and common options.
#include "core/base/Progress.h"
#include "core/engine/TrainingMetrics.h"
#include "core/model/UNet3d.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <map>
#include <string>

namespace splitseg::cli {

// Network options shared by train, infer --synthetic and bench.
struct NetworkArgs {
  std::int64_t base = 32;
  int depth = 5;
  std::int64_t inChannels = 1;
  int classes = 1;  // foreground classes
  std::string norm = model::toString(model::UNet3dOptions{}.norm());  // the U-Net's default
  void add(CLI::App& cmd);
  model::UNet3dOptions options() const;
};

nlohmann::json toJson(const engine::DeviceMemory& m);
// `planned` (engine::plannedStepPeaks): each device's and rank's planned peak beside its measured one.
nlohmann::json toJson(const engine::StepMetrics& m, const std::map<std::string, std::int64_t>& planned = {});

// --progress jsonl: one JSON object per step on stdout. bar: a one-line bar on stderr. none.
class CliMetrics final : public engine::MetricsSink {
public:
  // `planNote`: why there is no plan, said once at the first step (a run that fails before it says
  // its own one line).
  explicit CliMetrics(std::string mode, std::map<std::string, std::int64_t> planned = {}, std::string planNote = {})
      : mode_(std::move(mode)), planned_(std::move(planned)), planNote_(std::move(planNote)) {}
  void onStep(const engine::StepMetrics& m) override;
  void onValidation(const engine::ValidationMetrics& v) override;
  void onCheckpoint(const std::string& path, std::int64_t step) override;
  void onMessage(const std::string& text) override;

private:
  std::string mode_;
  std::map<std::string, std::int64_t> planned_;  // bytes by the planner's device names
  std::string planNote_;
};

class CliProgress final : public ProgressSink {
public:
  explicit CliProgress(std::string mode) : mode_(std::move(mode)) {}
  void progress(double fraction, const std::string& message) override;

private:
  std::string mode_;
};


} // namespace splitseg::cli
