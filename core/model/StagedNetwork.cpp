#include "core/model/StagedNetwork.h"

namespace splitseg::model {

std::vector<std::string> StagedNetwork::stageNames() const {
  std::vector<std::string> names;
  for (const auto& s : stageSpecs()) names.push_back(s.name);
  return names;
}

std::int64_t StagedNetwork::parameterCount() {
  std::int64_t n = 0;
  for (const auto& p : root().parameters()) n += p.numel();
  return n;
}

std::int64_t StagedNetwork::stageParameterCount(std::size_t i) {
  std::int64_t n = 0;
  for (const auto& p : stageModule(i)->parameters()) n += p.numel();
  return n;
}

} // namespace splitseg::model
