#pragma once
// Which rank runs which stage, who consumes whose output, and in what order each rank runs its
// (stage, micro-batch) cells: the GPipe schedule for a network of named stages with skip
// connections. Pure bookkeeping (no tensors), shared by every rank so their orders match.
//
// Deadlock freedom: every rank runs its cells in the order of one global order in which each
// cell comes after the cells it reads from (forward) or whose gradients it needs (backward);
// sends never block, so a rank blocked in a receive waits only for cells that are earlier in
// that order, which by induction complete. The order is a wavefront: cells sorted by
// (segment + micro-batch, stage), where a segment is a run of consecutive stages on one rank, so
// a rank starts micro-batch m+1 while m is downstream.
#include "core/model/StagedNetwork.h"

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::dist {

struct Cell {
  int stage = 0;
  int micro = 0;
  bool operator==(const Cell& o) const { return stage == o.stage && micro == o.micro; }
};

// What a message carries; part of its tag.
enum class Message { Activation = 0, Gradient = 1, Input = 2, Target = 3, Result = 4, Stats = 5, State = 6 };

class PipelineSchedule {
public:
  // owner[i]: the rank of stage i. Throws InvalidArgument for an input no earlier stage produces.
  PipelineSchedule(std::vector<model::StageSpec> specs, std::vector<int> owner, int microBatches);

  int stageCount() const { return static_cast<int>(specs_.size()); }
  int microBatches() const { return micro_; }
  const model::StageSpec& spec(int stage) const { return specs_.at(stage); }
  int owner(int stage) const { return owner_.at(stage); }
  int headStage() const { return stageCount() - 1; }
  // Stage producing `input` (-1: the network input).
  int producer(const std::string& input) const;
  // Ranks other than the owner that read stage's output (each gets it once), ascending.
  std::vector<int> remoteReaders(int stage) const;
  // Input edges from `stage` into stages on `rank` (a stage reading it twice counts twice).
  int readsOn(int stage, int rank) const;
  // Ranks other than 0 whose stages read the network input.
  std::vector<int> inputReaders() const;
  std::vector<Cell> forwardOrder(int rank) const;
  std::vector<Cell> backwardOrder(int rank) const;
  std::vector<int> stagesOf(int rank) const;

  // Micro-batch sizes: the batch split as evenly as possible, larger ones first.
  static std::vector<int> microSizes(int batch, int microBatches);
  static int tag(Message kind, int stage, int micro);

private:
  std::vector<model::StageSpec> specs_;
  std::vector<int> owner_;
  std::vector<int> segment_;
  int segments_ = 0;
  int micro_ = 1;
};

} // namespace splitseg::dist
