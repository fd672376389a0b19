#include "core/dist/PipelineSchedule.h"
#include "core/base/Error.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace splitseg::dist {

PipelineSchedule::PipelineSchedule(std::vector<model::StageSpec> specs, std::vector<int> owner, int microBatches)
    : specs_(std::move(specs)), owner_(std::move(owner)), micro_(microBatches) {
  if (specs_.empty() || owner_.size() != specs_.size())
    throw InvalidArgument("pipeline: one owning rank per stage is needed");
  if (micro_ < 1 || micro_ > 4095) throw InvalidArgument("pipeline: micro-batches must be 1..4095");
  if (specs_.size() > 4095) throw InvalidArgument("pipeline: at most 4095 stages");
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (i > 0 && owner_[i] != owner_[i - 1]) ++segments_;
    segment_.push_back(segments_);
    for (const auto& in : specs_[i].inputs) {
      const int p = producer(in);
      if (p >= static_cast<int>(i)) throw InvalidArgument("pipeline: stage " + specs_[i].name + " reads a later stage");
    }
  }
  ++segments_;
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
      if (in == specs_[stage].name && owner_[c] != owner_[stage]) ranks.insert(owner_[c]);
  return {ranks.begin(), ranks.end()};
}

int PipelineSchedule::readsOn(int stage, int rank) const {
  int n = 0;
  for (int c = stage + 1; c < stageCount(); ++c)
    for (const auto& in : specs_[c].inputs)
      if (in == specs_[stage].name && owner_[c] == rank) ++n;
  return n;
}

std::vector<int> PipelineSchedule::inputReaders() const {
  std::set<int> ranks;
  for (int c = 0; c < stageCount(); ++c)
    for (const auto& in : specs_[c].inputs)
      if (in == model::kInput && owner_[c] != 0) ranks.insert(owner_[c]);
  return {ranks.begin(), ranks.end()};
}

std::vector<int> PipelineSchedule::stagesOf(int rank) const {
  std::vector<int> s;
  for (int i = 0; i < stageCount(); ++i)
    if (owner_[i] == rank) s.push_back(i);
  return s;
}

std::vector<Cell> PipelineSchedule::forwardOrder(int rank) const {
  std::vector<Cell> cells;
  for (int i : stagesOf(rank))
    for (int m = 0; m < micro_; ++m) cells.push_back({i, m});
  std::sort(cells.begin(), cells.end(), [&](const Cell& a, const Cell& b) {
    return std::make_tuple(segment_[a.stage] + a.micro, a.stage) < std::make_tuple(segment_[b.stage] + b.micro, b.stage);
  });
  return cells;
}

std::vector<Cell> PipelineSchedule::backwardOrder(int rank) const {
  std::vector<Cell> cells;
  for (int i : stagesOf(rank))
    for (int m = 0; m < micro_; ++m) cells.push_back({i, m});
  auto key = [&](const Cell& c) { return std::make_tuple(segments_ - 1 - segment_[c.stage] + c.micro, -c.stage); };
  std::sort(cells.begin(), cells.end(), [&](const Cell& a, const Cell& b) { return key(a) < key(b); });
  return cells;
}

std::vector<int> PipelineSchedule::microSizes(int batch, int microBatches) {
  if (microBatches < 1 || microBatches > batch) throw InvalidArgument("micro-batches must be 1..batch");
  std::vector<int> sizes(microBatches, batch / microBatches);
  for (int m = 0; m < batch % microBatches; ++m) ++sizes[m];
  return sizes;
}

int PipelineSchedule::tag(Message kind, int stage, int micro) {
  return (static_cast<int>(kind) << 24) | ((stage & 0xfff) << 12) | (micro & 0xfff);
}

} // namespace splitseg::dist
