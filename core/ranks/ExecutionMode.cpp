#include "core/ranks/ExecutionMode.h"

#include <algorithm>

namespace splitseg::ranks {

namespace {
bool everyStageSharded(const placement::Placement& p, int worldSize) {
  if (p.stages().empty()) return false;
  const std::string& entry = p.entryOf(p.stages().front());
  std::vector<int> owners;
  for (const auto& d : placement::splitShards(entry)) owners.push_back(placement::splitRank(d).rank);
  if (static_cast<int>(owners.size()) != worldSize) return false;
  std::sort(owners.begin(), owners.end());
  for (int r = 0; r < worldSize; ++r)
    if (owners[static_cast<std::size_t>(r)] != r) return false;
  for (const auto& s : p.stages())
    if (p.entryOf(s) != entry) return false;
  return true;
}
} // namespace

ExecutionMode executionModeOf(const placement::Placement& placement, int worldSize) {
  if (worldSize < 2) return ExecutionMode::OneProcess;
  return everyStageSharded(placement, worldSize) ? ExecutionMode::Sharded : ExecutionMode::Pipeline;
}

ExecutionMode executionModeOf(const run::RunSpec& spec, const std::vector<std::string>& stages, int worldSize) {
  if (worldSize < 2) return ExecutionMode::OneProcess;
  return executionModeOf(spec.resolvePlacement(stages, "cpu"), worldSize);
}

std::string toString(ExecutionMode mode) {
  switch (mode) {
    case ExecutionMode::OneProcess: return "one process";
    case ExecutionMode::Pipeline: return "pipeline over ranks";
    case ExecutionMode::Sharded: return "every stage sharded";
  }
  return "?";
}

} // namespace splitseg::ranks
