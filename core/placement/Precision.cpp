#include "core/placement/Precision.h"
#include "core/base/Error.h"

#include <algorithm>

namespace splitseg::placement {

std::string toString(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }

Precision precisionFromString(const std::string& s) {
  if (s == "fp32" || s == "float32") return Precision::FP32;
  if (s == "bf16" || s == "bfloat16") return Precision::BF16;
  throw InvalidArgument("unknown precision '" + s + "' (fp32, bf16)");
}

Precision StagePrecisions::of(const std::string& stage) const {
  const auto it = stages.find(stage);
  return it == stages.end() ? fallback : it->second;
}

std::string StagePrecisions::toString(const std::vector<std::string>& order) const {
  std::vector<std::string> names = order;
  for (const auto& [name, p] : stages)
    if (std::find(order.begin(), order.end(), name) == order.end()) names.push_back(name);
  std::string listed;
  for (const auto& name : names)
    if (stages.count(name) && stages.at(name) != fallback) listed += (listed.empty() ? "" : ",") + name;
  if (listed.empty()) return placement::toString(fallback);
  const Precision other = fallback == Precision::FP32 ? Precision::BF16 : Precision::FP32;
  return placement::toString(other) + ":" + listed;
}

StagePrecisions StagePrecisions::parse(const std::string& text, const std::vector<std::string>& stageNames) {
  StagePrecisions sp;
  const auto colon = text.find(':');
  const Precision p = precisionFromString(text.substr(0, colon));
  if (colon == std::string::npos) {
    sp.fallback = p;
    return sp;
  }
  sp.fallback = p == Precision::FP32 ? Precision::BF16 : Precision::FP32;
  std::string rest = text.substr(colon + 1);
  std::size_t start = 0;
  while (start <= rest.size()) {
    const auto comma = rest.find(',', start);
    const std::string name = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw InvalidArgument("precision '" + text + "': empty stage name (write P or P:stage,stage)");
    if (!stageNames.empty() && std::find(stageNames.begin(), stageNames.end(), name) == stageNames.end()) {
      std::string known;
      for (const auto& n : stageNames) known += (known.empty() ? "" : ", ") + n;
      throw InvalidArgument("precision '" + text + "': unknown stage '" + name + "' (stages: " + known + ")");
    }
    sp.stages[name] = p;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sp;
}

} // namespace splitseg::placement
