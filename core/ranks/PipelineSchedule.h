#pragma once
// Which rank runs which stage, who consumes whose output, and in what order each rank runs its
// (stage, micro-batch) cells: the GPipe schedule for a network of named stages with skip
// connections. Pure bookkeeping (no tensors), shared by every rank so their orders match.
//
// The order itself (a wavefront, deadlock-free) lives in placement::PipelineOrder, shared with the
// planner's step-time model.
#include "core/model/StagedNetwork.h"
#include "core/placement/PipelineOrder.h"

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::ranks {

using Cell = placement::PipelineCell;

// What a message carries; part of its tag.
enum class Message { Activation = 0, Gradient = 1, Input = 2, Target = 3, Result = 4, Stats = 5, State = 6 };

class PipelineSchedule {
public:
  // owner[i]: the rank of stage i. Throws InvalidArgument for an input no earlier stage produces.
  PipelineSchedule(std::vector<model::StageSpec> specs, std::vector<int> owner, int microBatches);

  int stageCount() const { return static_cast<int>(specs_.size()); }
  int microBatches() const { return order_.microBatches(); }
  const model::StageSpec& spec(int stage) const { return specs_.at(stage); }
  int owner(int stage) const { return order_.owner(stage); }
  int headStage() const { return stageCount() - 1; }
  // Stage producing `input` (-1: the network input).
  int producer(const std::string& input) const;
  // Ranks other than the owner that read stage's output (each gets it once), ascending.
  std::vector<int> remoteReaders(int stage) const;
  // Input edges from `stage` into stages on `rank` (a stage reading it twice counts twice).
  int readsOn(int stage, int rank) const;
  // Ranks other than 0 whose stages read the network input.
  std::vector<int> inputReaders() const;
  std::vector<Cell> forwardOrder(int rank) const { return order_.forward(rank); }
  std::vector<Cell> backwardOrder(int rank) const { return order_.backward(rank); }
  std::vector<int> stagesOf(int rank) const { return order_.stagesOf(rank); }

  static int tag(Message kind, int stage, int micro);

private:
  std::vector<model::StageSpec> specs_;
  placement::PipelineOrder order_;
};

} // namespace splitseg::ranks
