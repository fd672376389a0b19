#pragma once
// The order in which each rank runs its (stage, micro-batch) cells under the GPipe schedule: one
// home for it, so the ranks' trainer (ranks::PipelineSchedule) and the planner's step-time model
// (StepTime) follow the same order. Pure bookkeeping over which rank owns which stage.
//
// The order is a wavefront: cells sorted by (segment + micro-batch, stage), where a segment is a
// run of consecutive stages on one rank, so a rank starts micro-batch m+1 while m is downstream.
// Backward runs the mirror image. Every rank's order is a sub-order of one global order in which a
// cell comes after what it reads, which is what keeps blocking receives deadlock-free.
#include <vector>

namespace splitseg::placement {

struct PipelineCell {
  int stage = 0;
  int micro = 0;
  bool operator==(const PipelineCell& o) const { return stage == o.stage && micro == o.micro; }
};

class PipelineOrder {
public:
  // owner[i]: the rank of stage i (stages in network order). Throws InvalidArgument for no
  // stages, a negative rank, or micro-batches outside 1..4095.
  PipelineOrder(std::vector<int> owner, int microBatches);

  int stageCount() const { return static_cast<int>(owner_.size()); }
  int microBatches() const { return micro_; }
  int owner(int stage) const { return owner_.at(stage); }
  int segments() const { return segments_; }
  std::vector<int> stagesOf(int rank) const;
  std::vector<PipelineCell> forward(int rank) const;
  std::vector<PipelineCell> backward(int rank) const;

  // Micro-batch sizes: the batch split as evenly as possible, larger ones first. Throws
  // InvalidArgument unless 1 <= microBatches <= batch.
  static std::vector<int> microSizes(int batch, int microBatches);

private:
  std::vector<int> owner_;
  std::vector<int> segment_;
  int segments_ = 0;
  int micro_ = 1;
};

} // namespace splitseg::placement
