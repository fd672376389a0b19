#include "core/ranks/PipelineSchedule.h"
#include "core/base/Error.h"

#include <algorithm>
#include <set>

namespace splitseg::ranks {

PipelineSchedule::PipelineSchedule(std::vector<model::StageSpec> specs, std::vector<int> owner, int microBatches)
    : specs_(std::move(specs)), order_(std::move(owner), microBatches) {
  if (specs_.empty() || static_cast<std::size_t>(order_.stageCount()) != specs_.size())
    throw InvalidArgument("pipeline: one owning rank per stage is needed");
  if (specs_.size() > 4095) throw InvalidArgument("pipeline: at most 4095 stages");
  for (std::size_t i = 0; i < specs_.size(); ++i)
    for (const auto& in : specs_[i].inputs) {
      const int p = producer(in);
      if (p >= static_cast<int>(i)) throw InvalidArgument("pipeline: stage " + specs_[i].name + " reads a later stage");
    }
}

int PipelineSchedule::producer(const std::string& input) const {
  if (input == model::kInput) return -1;
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == input) return static_cast<int>(i);
  throw InvalidArgument("pipeline: no stage produces '" + input + "'");
}

std::vector<int> PipelineSchedule::remoteReaders(int stage) const {
  std::set<int> ranks;
  for (int c = stage + 1; c < stageCount(); ++c)
    for (const auto& in : specs_[c].inputs)
      if (in == specs_[stage].name && owner(c) != owner(stage)) ranks.insert(owner(c));
  return {ranks.begin(), ranks.end()};
}

int PipelineSchedule::readsOn(int stage, int rank) const {
  int n = 0;
  for (int c = stage + 1; c < stageCount(); ++c)
    for (const auto& in : specs_[c].inputs)
      if (in == specs_[stage].name && owner(c) == rank) ++n;
  return n;
}

std::vector<int> PipelineSchedule::inputReaders() const {
  std::set<int> ranks;
  for (int c = 0; c < stageCount(); ++c)
    for (const auto& in : specs_[c].inputs)
      if (in == model::kInput && owner(c) != 0) ranks.insert(owner(c));
  return {ranks.begin(), ranks.end()};
}

int PipelineSchedule::tag(Message kind, int stage, int micro) {
  return (static_cast<int>(kind) << 24) | ((stage & 0xfff) << 12) | (micro & 0xfff);
}

} // namespace splitseg::ranks
