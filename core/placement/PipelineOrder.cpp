#include "core/placement/PipelineOrder.h"
#include "core/base/Error.h"

#include <algorithm>
#include <tuple>

namespace splitseg::placement {

PipelineOrder::PipelineOrder(std::vector<int> owner, int microBatches) : owner_(std::move(owner)), micro_(microBatches) {
  if (owner_.empty()) throw InvalidArgument("pipeline: no stages");
  if (micro_ < 1 || micro_ > 4095) throw InvalidArgument("pipeline: micro-batches must be 1..4095");
  for (std::size_t i = 0; i < owner_.size(); ++i) {
    if (owner_[i] < 0) throw InvalidArgument("pipeline: a stage has no rank");
    if (i > 0 && owner_[i] != owner_[i - 1]) ++segments_;
    segment_.push_back(segments_);
  }
  ++segments_;
}

std::vector<int> PipelineOrder::stagesOf(int rank) const {
  std::vector<int> s;
  for (int i = 0; i < stageCount(); ++i)
    if (owner_[i] == rank) s.push_back(i);
  return s;
}

std::vector<PipelineCell> PipelineOrder::forward(int rank) const {
  std::vector<PipelineCell> cells;
  for (int i : stagesOf(rank))
    for (int m = 0; m < micro_; ++m) cells.push_back({i, m});
  auto key = [&](const PipelineCell& c) { return std::make_tuple(segment_[c.stage] + c.micro, c.stage); };
  std::sort(cells.begin(), cells.end(), [&](const PipelineCell& a, const PipelineCell& b) { return key(a) < key(b); });
  return cells;
}

std::vector<PipelineCell> PipelineOrder::backward(int rank) const {
  std::vector<PipelineCell> cells;
  for (int i : stagesOf(rank))
    for (int m = 0; m < micro_; ++m) cells.push_back({i, m});
  auto key = [&](const PipelineCell& c) { return std::make_tuple(segments_ - 1 - segment_[c.stage] + c.micro, -c.stage); };
  std::sort(cells.begin(), cells.end(), [&](const PipelineCell& a, const PipelineCell& b) { return key(a) < key(b); });
  return cells;
}

std::vector<int> PipelineOrder::microSizes(int batch, int microBatches) {
  if (microBatches < 1 || microBatches > batch) throw InvalidArgument("micro-batches must be 1..batch");
  std::vector<int> sizes(microBatches, batch / microBatches);
  for (int m = 0; m < batch % microBatches; ++m) ++sizes[m];
  return sizes;
}

} // namespace splitseg::placement
