#pragma once
// The one precision type of the project: the planner plans with it, the engine autocasts with
// it, run descriptions, sessions and checkpoints store its text.
#include <map>
#include <string>
#include <vector>

namespace splitseg::placement {

enum class Precision { FP32, BF16 };
std::string toString(Precision p);
Precision precisionFromString(const std::string& s);  // "fp32" | "bf16"

// Precision per stage: a default plus the stages that differ from it. As text (CLI --precision,
// sessions, checkpoints): "fp32" or "bf16" for every stage, or "P:stage,stage" for the listed
// stages in P and every other stage in the other precision ("bf16:enc0,dec0", "fp32:head").
struct StagePrecisions {
  Precision fallback = Precision::FP32;
  std::map<std::string, Precision> stages;  // overrides of fallback
  Precision of(const std::string& stage) const;
  // Shortest text: overrides equal to the fallback are dropped; stages listed in `order`
  // (the network's) when given, else alphabetically.
  std::string toString(const std::vector<std::string>& order = {}) const;
  // Throws InvalidArgument (one line) for an unknown precision or, when stageNames is not
  // empty, a stage the network does not have.
  static StagePrecisions parse(const std::string& text, const std::vector<std::string>& stageNames = {});
};

} // namespace splitseg::placement
