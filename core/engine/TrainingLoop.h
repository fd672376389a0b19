#pragma once
// The one training loop, for every parallel mode: steps until the run's total, validation and
// checkpoints at their cadence, stop and pause between steps, the final checkpoint, and one policy
// for a step that fails. A mode (one process: Trainer; over ranks: PipelineTrainer, SpatialTrainer)
// only runs a batch forward and backward and updates its weights.
#include "core/base/CancelToken.h"
#include "core/base/Error.h"
#include "core/engine/TrainingMetrics.h"
#include "core/run/RunSpec.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::engine {

// A step whose loss is NaN or infinite: it was not applied (weights and optimizer as before it).
class NonFiniteLoss : public Error {
public:
  using Error::Error;
};

class TrainingMode {
public:
  virtual ~TrainingMode() = default;

  // One step. A step that fails leaves weights and optimizer as they were before it: NonFiniteLoss
  // (thrown on every rank alike), OutOfMemoryError, or c10::OutOfMemoryError (named by outOfMemory).
  virtual StepMetrics step() = 0;
  virtual ValidationMetrics validate() = 0;
  virtual void saveCheckpoint(const std::string& path) = 0;
  virtual std::int64_t stepsDone() const = 0;

  // Whether to take another step: false once `cancel` is cancelled; waits while it is paused. Over
  // ranks rank 0 decides for every rank, so all stop after the same step.
  virtual bool nextStep(CancelToken* cancel) = 0;
  // Turns LibTorch's out-of-memory error into an OutOfMemoryError that names where it happened.
  [[noreturn]] virtual void outOfMemory(const c10::OutOfMemoryError& e, const std::string& what) = 0;
  // Whether a checkpoint can be written after an out-of-memory step: over ranks the other ranks
  // are still inside the step, so a collective save cannot run.
  virtual bool savesAfterOutOfMemory() const { return true; }
  // A run without a checkpoint path ends with the trained weights in this process's network.
  virtual void keepWeights() {}
  // After the final checkpoint (over ranks: rank 0 serves the rendezvous until every rank is done).
  virtual void finish() {}
  // Whether this process reports metrics (over ranks: rank 0 only).
  virtual bool reports() const { return true; }
};

// Runs `mode` until spec.totalSteps() are done or `cancel` stops it (returns normally then, after
// writing the checkpoint). A failed step throws after the steps done since the run started were
// written to spec.checkpoint.
void runTraining(TrainingMode& mode, const run::RunSpec& spec, MetricsSink* sink, CancelToken* cancel);

// The one message of a refused step: "step 3: the loss is nan; the step was not applied and ..."
// (`micro` >= 0 names the micro-batch).
std::string nonFiniteLossMessage(std::int64_t step, double value, int micro = -1);

// Every mode reports Dice the same way: the mean over classes of a step's Dice per class, and a
// validation's Dice per class (and their mean) averaged over its samples.
double meanDice(const std::vector<double>& perClass);
void averageDice(ValidationMetrics& v, const std::vector<std::vector<double>>& perSample);

} // namespace splitseg::engine
