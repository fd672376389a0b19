#pragma once
// What the trainers over ranks (PipelineTrainer, SpatialTrainer) share as modes of the one
// training loop (engine::runTraining): rank 0 decides every next step for all ranks, the loss's
// rank tells every rank whether the step's loss was finite before any rank updates its weights, an
// out-of-memory names the rank, and the run ends with a barrier so rank 0 serves the rendezvous
// until every rank is done. Metrics go to the sink on rank 0 only.
#include "core/base/CancelToken.h"
#include "core/engine/TrainingLoop.h"
#include "core/ranks/Comm.h"

#include <cstdint>
#include <string>

namespace splitseg::ranks {

// Before every step rank 0 tells the others whether to go on: Stop (rank 0's cancel token) ends
// the run on every rank after the same step; while paused, rank 0 keeps the others waiting with a
// message every second, so a pause is not taken for a dead rank.
int stepControlTag();
enum class StepControl : std::int64_t { Stop = 0, Step = 1, Paused = 2 };
bool nextStep(Comm& comm, CancelToken* cancel);

// After backward, before any optimizer update: `lossRank` sends every other rank whether the
// loss of step `step` was finite (`value`, of micro-batch `micro`, is its first non-finite loss;
// NaN-free when it was). Every rank then throws the same engine::NonFiniteLoss for a refused step,
// so the loop can save the last good state collectively.
void agreeLossIsFinite(Comm& comm, int lossRank, std::int64_t step, double value, int micro);

class RankTrainingMode : public engine::TrainingMode {
public:
  explicit RankTrainingMode(Comm& comm) : comm_(comm) {}

  bool nextStep(CancelToken* cancel) override { return ranks::nextStep(comm_, cancel); }
  [[noreturn]] void outOfMemory(const c10::OutOfMemoryError& e, const std::string& what) override;
  // The other ranks are inside the step: a collective save cannot run.
  bool savesAfterOutOfMemory() const override { return false; }
  void finish() override { comm_.barrier("the end of the run"); }
  bool reports() const override { return comm_.rank() == 0; }

  // What step() or validate() was doing last ("enc1 (backward, micro-batch 2 of 4)"): the stage an
  // out-of-memory names, as the one-process Trainer names its stage.
  const std::string& working() const { return working_; }

protected:
  Comm& comm_;
  std::string working_;
};

} // namespace splitseg::ranks
