#include "app/cli/CliSupport.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/PlannedPeaks.h"

#include <cstdio>
#include <iostream>
#include <sstream>

namespace splitseg::cli {

void NetworkArgs::add(CLI::App& cmd) {
  cmd.add_option("--base", base, "base channels of the U-Net")->capture_default_str()->check(CLI::PositiveNumber);
  cmd.add_option("--depth", depth, "U-Net depth (levels)")->capture_default_str()->check(CLI::Range(2, 7));
  cmd.add_option("--classes", classes, "foreground classes")->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--norm", norm, "none|instance|batch")->capture_default_str();
}

model::UNet3dOptions NetworkArgs::options() const {
  model::UNet3dOptions o;
  o.in_channels(inChannels).out_channels(classes == 1 ? 1 : classes + 1).base_channels(base).depth(depth);
  o.norm(model::normFromString(norm));
  return o;
}

nlohmann::json toJson(const engine::DeviceMemory& m) {
  return {{"device", m.device}, {"allocated", m.allocated}, {"reserved", m.reserved},
          {"peak", m.peak},     {"reserved_peak", m.reservedPeak}, {"total", m.total}, {"free", m.free}};
}

nlohmann::json toJson(const engine::StepMetrics& m, const std::map<std::string, std::int64_t>& planned) {
  nlohmann::json mem = nlohmann::json::array();
  const int here = m.ranks.empty() ? -1 : 0;  // over ranks this process is rank 0
  for (const auto& d : m.memory) {
    mem.push_back(toJson(d));
    if (auto it = planned.find(engine::plannerDeviceName(here, d.device)); it != planned.end()) mem.back()["planned"] = it->second;
  }
  nlohmann::json j{{"step", m.step},       {"total_steps", m.totalSteps}, {"epoch", m.epoch},
                   {"loss", m.loss},       {"dice", m.dice},              {"mean_dice", m.meanDice},
                   {"lr", m.learningRate},
                   {"seconds", m.seconds}, {"memory", mem},               {"host_rss", m.hostRss}};
  if (!m.ranks.empty()) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : m.ranks)
      ranks.push_back({{"rank", r.rank}, {"device", r.device}, {"compute_s", r.computeSeconds},
                       {"wait_s", r.waitSeconds}, {"idle_s", r.idleSeconds}, {"bytes_sent", r.bytesSent},
                       {"bytes_received", r.bytesReceived}, {"peak_bytes", r.peakBytes}});
    for (auto& r : ranks)
      if (auto it = planned.find(engine::plannerDeviceName(r["rank"].get<int>(), r["device"].get<std::string>()));
          it != planned.end())
        r["planned_bytes"] = it->second;
    j["ranks"] = ranks;
  }
  if (!m.timeline.empty()) {
    nlohmann::json spans = nlohmann::json::array();
    for (const auto& s : m.timeline)
      spans.push_back({{"lane", s.lane}, {"stage", s.stage}, {"kind", engine::toString(s.kind)}, {"micro", s.micro},
                       {"start", s.start}, {"end", s.end}});
    j["timeline"] = spans;
  }
  return j;
}

void CliMetrics::onStep(const engine::StepMetrics& m) {
  if (!planNote_.empty()) {
    std::cerr << "note: no memory plan for this run (" << planNote_ << ")\n";
    planNote_.clear();
  }
  if (mode_ == "jsonl") {
    std::cout << toJson(m, planned_).dump() << std::endl;
  } else if (mode_ == "bar") {
    const int width = 30;
    const int filled = static_cast<int>(width * m.step / std::max<std::int64_t>(1, m.totalSteps));
    std::string peaks;
    const int here = m.ranks.empty() ? -1 : 0;
    auto add = [&](const std::string& name, std::int64_t peak) {
      peaks += " " + name + " peak " + formatBytes(double(peak));
      if (auto it = planned_.find(name); it != planned_.end()) peaks += " (plan " + formatBytes(double(it->second)) + ")";
    };
    for (const auto& d : m.memory) add(engine::plannerDeviceName(here, d.device), d.peak);
    for (const auto& r : m.ranks)  // the other ranks' devices, as they reported them
      if (r.rank > 0) add(engine::plannerDeviceName(r.rank, r.device), r.peakBytes);
    std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f dice %.3f %.2fs/step%s   ",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<long long>(m.step), static_cast<long long>(m.totalSteps), m.loss, m.meanDice,
                 m.seconds, peaks.c_str());
    if (m.step == m.totalSteps) std::fprintf(stderr, "\n");
  }
}

void CliMetrics::onValidation(const engine::ValidationMetrics& v) {
  if (v.cases == 0) {
    // No validation cases (a single training case, or phantoms without a validation set): say so
    // instead of reporting a loss of 0.
    if (mode_ == "jsonl")
      std::cout << nlohmann::json{{"validation", true}, {"step", v.step}, {"cases", 0},
                                  {"message", "no validation cases"}}.dump()
                << std::endl;
    else if (mode_ == "bar")
      std::fprintf(stderr, "\n  validation @%lld: no validation cases\n", static_cast<long long>(v.step));
    return;
  }
  if (mode_ == "jsonl")
    std::cout << nlohmann::json{{"validation", true}, {"step", v.step}, {"cases", v.cases}, {"loss", v.loss}, {"dice", v.dice}}.dump()
              << std::endl;
  else if (mode_ == "bar")
    std::fprintf(stderr, "\n  validation @%lld: loss %.4f dice %.3f\n", static_cast<long long>(v.step), v.loss,
                 v.meanDice);
}

void CliMetrics::onCheckpoint(const std::string& path, std::int64_t step) {
  if (mode_ == "jsonl")
    std::cout << nlohmann::json{{"checkpoint", path}, {"step", step}}.dump() << std::endl;
  else if (mode_ == "bar")
    std::fprintf(stderr, "\n  checkpoint %s @%lld\n", path.c_str(), static_cast<long long>(step));
}

void CliMetrics::onMessage(const std::string& text) {
  if (mode_ == "jsonl") std::cout << nlohmann::json{{"message", text}}.dump() << std::endl;
  else if (mode_ != "none") std::cerr << text << "\n";
}

void CliProgress::progress(double fraction, const std::string& message) {
  if (mode_ == "jsonl")
    std::cout << nlohmann::json{{"progress", fraction}, {"message", message}}.dump() << std::endl;
  else if (mode_ == "bar")
    std::fprintf(stderr, "\r%5.1f%% %s      %s", 100.0 * fraction, message.c_str(), fraction >= 1.0 ? "\n" : "");
}

} // namespace splitseg::cli
