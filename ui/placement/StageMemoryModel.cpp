#include "ui/placement/StageMemoryModel.h"

#include <cmath>

namespace splitseg::ui {

namespace {
std::int64_t voxelsAt(const RunSettings& s, int level) {
  std::int64_t v = 1;
  for (auto d : s.patch) v *= std::max<std::int64_t>(1, d >> level);
  return v;
}
} // namespace

PlacementEstimate StageMemoryModel::estimate(const QVector<StageInfo>& stages, const placement::Placement& placement,
                                             const RunSettings& settings) {
  PlacementEstimate out;
  const double elem = settings.precision == "bf16" ? 2.0 : 4.0;
  std::map<std::string, const StageInfo*> byName;
  for (const auto& s : stages) byName[s.name] = &s;
  auto deviceOf = [&](const std::string& stage) -> std::string {
    if (stage == "input") return placement.stages().empty() ? "cpu" : placement.deviceOf(placement.stages().front());
    return placement.deviceOf(stage);
  };
  for (const auto& s : stages) {
    const std::int64_t v = voxelsAt(settings, s.level) * settings.batch;
    // Inputs as the stage receives them (channels at their own resolution).
    double inputElems = 0;
    for (const auto& in : s.inputs) {
      const auto it = byName.find(in);
      const auto ch = it == byName.end() ? s.inChannels : it->second->outChannels;
      const int lvl = it == byName.end() ? 0 : it->second->level;
      inputElems += double(ch) * voxelsAt(settings, lvl) * settings.batch;
    }
    // Two conv+ReLU pairs save about four tensors of the output width (PyTorch autograd);
    // a checkpointed stage keeps only its inputs and recomputes the rest in backward.
    const bool cp = settings.checkpointStages.count(s.name) > 0;
    const double act = inputElems + (cp ? 0.0 : 4.0 * double(s.outChannels) * double(v));
    // Weights, gradients and Adam's two moments stay fp32.
    const double params = double(s.parameters) * 4.0 * 4.0;
    out.stageBytes[s.name] = static_cast<std::int64_t>(act * elem + params);
    if (!placement.stages().empty()) out.deviceBytes[placement.deviceOf(s.name)] += out.stageBytes[s.name];
  }
  if (placement.stages().empty()) return out;
  for (const auto& s : stages) {
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      const auto& in = s.inputs[i];
      const auto it = byName.find(in);
      if (it == byName.end()) continue;  // the network input is loaded where the first stage runs
      const auto from = deviceOf(in), to = deviceOf(s.name);
      if (from == to) continue;
      CrossTransfer t;
      t.fromStage = in;
      t.toStage = s.name;
      t.fromDevice = from;
      t.toDevice = to;
      const double elems = double(it->second->outChannels) * voxelsAt(settings, it->second->level) * settings.batch;
      t.bytesPerStep = static_cast<std::int64_t>(2.0 * elems * elem);
      // The decoder's second input is its encoder twin's output: the skip connection.
      t.skip = s.name.rfind("dec", 0) == 0 && i > 0;
      out.transfers.push_back(t);
      out.deviceBytes[to] += static_cast<std::int64_t>(elems * elem);
    }
  }
  return out;
}

} // namespace splitseg::ui
