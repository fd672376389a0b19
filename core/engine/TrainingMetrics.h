#pragma once
// What the engine reports while it works. Front ends implement MetricsSink: the GUI turns
// calls into queued Qt signals, the CLI prints JSON lines. Calls come from the worker thread.
#include "core/engine/StepTimeline.h"

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::engine {

// Memory of one device at one moment. Every number is measured (allocator statistics or
// LibTorch's own allocation reports), never estimated.
struct DeviceMemory {
  std::string device;            // "cpu", "cuda:0"
  std::int64_t allocated = 0;    // bytes held by tensors now
  std::int64_t reserved = 0;     // bytes held by the caching allocator (CUDA) / == allocated (CPU)
  std::int64_t peak = 0;         // peak allocated since the last reset (the step start)
  std::int64_t reservedPeak = 0; // peak reserved since the last reset (CUDA: what a memory cap
                                 // bounds, allocated plus the cache's free blocks) / == peak (CPU)
  std::int64_t total = 0;        // device capacity (CUDA total, host physical memory)
  std::int64_t free = 0;         // cudaMemGetInfo free / host available
};

// One rank's share of a step (runs over several processes): measured with a steady clock and
// counted on that rank, then gathered by rank 0.
struct RankStepStats {
  int rank = 0;
  std::string device;            // the rank's device, "cpu" / "cuda:0"
  double computeSeconds = 0;     // running its stages (forward, backward, optimizer)
  double waitSeconds = 0;        // blocked receiving activations or gradients from other ranks
  double idleSeconds = 0;        // the rest of the step's wall time
  std::int64_t bytesSent = 0;
  std::int64_t bytesReceived = 0;
  std::int64_t peakBytes = 0;    // the rank's device allocator peak during the step
};

struct StepMetrics {
  std::int64_t step = 0;         // 1-based, steps done so far
  std::int64_t totalSteps = 0;
  int epoch = 0;
  double loss = 0;
  std::vector<double> dice;      // per foreground class
  double meanDice = 0;
  double learningRate = 0;       // the rate this step's update took (RunSpec::learningRateAt)
  double seconds = 0;            // wall time of this step
  std::vector<DeviceMemory> memory;
  std::int64_t hostRss = 0;      // process resident set size
  std::vector<RankStepStats> ranks;  // runs over several ranks: one entry per rank
  std::vector<TimelineSpan> timeline;  // when the trainer records one (setTimeline): every device's spans
};

struct ValidationMetrics {
  std::int64_t step = 0;
  int cases = 0;                // validation samples evaluated; 0: the data has none (loss and Dice mean nothing)
  double loss = 0;
  std::vector<double> dice;
  double meanDice = 0;
};

class MetricsSink {
public:
  virtual ~MetricsSink() = default;
  virtual void onStep(const StepMetrics& m) = 0;
  virtual void onValidation(const ValidationMetrics&) {}
  virtual void onCheckpoint(const std::string& /*path*/, std::int64_t /*step*/) {}
  virtual void onMessage(const std::string& /*text*/) {}
};

} // namespace splitseg::engine
