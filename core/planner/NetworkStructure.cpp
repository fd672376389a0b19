#include "core/planner/NetworkStructure.h"

namespace splitseg::planner {

std::string toString(LayerKind k) {
  switch (k) {
    case LayerKind::Conv: return "conv";
    case LayerKind::ConvTranspose: return "convT";
    case LayerKind::Norm: return "norm";
    case LayerKind::ReLU: return "relu";
    case LayerKind::MaxPool: return "maxpool";
    case LayerKind::Dropout: return "dropout";
    case LayerKind::Concat: return "cat";
  }
  return "?";
}

std::vector<std::string> NetworkStructure::stageNames() const {
  std::vector<std::string> n;
  for (const auto& s : stages) n.push_back(s.name);
  return n;
}

std::int64_t NetworkStructure::parameters() const {
  std::int64_t n = 0;
  for (const auto& s : stages) n += s.parameters;
  return n;
}

int NetworkStructure::indexOf(const std::string& stage) const {
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == stage) return static_cast<int>(i);
  return -1;
}

} // namespace splitseg::planner
