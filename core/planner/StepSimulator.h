#pragma once
// Internal to the planner: replays one training step tensor by tensor and records each
// device's memory. Separate from MemoryPlanner so the auto-placer can run it on flat inputs
// thousands of times without building reports.
#include "core/planner/MemoryPlanner.h"

#include <array>
#include <cstdint>
#include <vector>

namespace splitseg::planner::detail {

enum class Phase { Setup, Forward, Loss, Backward, Optimizer };
const char* toString(Phase p);

struct SimRequest {
  const NetworkStructure* network = nullptr;
  const PlannerOptions* options = nullptr;
  std::array<std::int64_t, 3> size{};
  int batch = 1;
  int wholeBatch = 0;  // the batch `batch` is a micro-batch of (0: itself)
  // One forward pass under InferenceMode (engine::Inferer) instead of a training step: parameters
  // only, nothing saved, dropout off (eval), each stage's output freed after its last reader, the
  // input held by the caller throughout, CPU fp32 convolutions in oneDNN (shard::OneDnnInferenceScope).
  // Stops at the end of forward: SimDevice::endOfForward holds the logits.
  bool inference = false;
  std::vector<char> bf16;          // per stage: runs under bf16 autocast
  std::vector<char> channelsLast;  // per stage: CPU stage with channels-last weights (empty: none)
  bool adam = true;
  std::vector<char> checkpointed;  // per stage
  // Checkpointed stages on CUDA devices keep their saved inputs in host memory between forward and
  // backward: fetched back when their backward begins, the next one in backward order prefetched.
  bool offload = false;
  std::vector<int> stageDevice;    // per stage: index into deviceIsCuda
  std::vector<char> deviceIsCuda;  // per device
  std::vector<int> deviceThreads;  // per device: DeviceSpec::cpuThreads (empty or 0: PlannerOptions::cpuThreads)
  // Per device: the rank whose process owns it (placement "r1:cpu"), or empty when no device names
  // a rank. Ranks run ranks::PipelineTrainer: each stage's inputs are leaves of its own graph, a
  // stage's inputs live until its backward ends and its output (the head's logits aside) until
  // that backward begins, and what a rank sends to another rank stays until the step's sends
  // complete at its end.
  std::vector<int> deviceRank;
  // Inference over ranks (ranks::PipelineInferer), per device: its rank. A rank receives a tensor
  // once for all its readers and holds it until the last; the sender's ranks::Comm::send makes a
  // channels-last tensor contiguous, a plain copy the send keeps to the pass's end.
  std::vector<int> inferenceRank;
  // Sharded stages, as one slab's view of the step: the stage runs on stageDevice with the volume
  // cut to stageSlab planes (at full resolution) along size[shardDim]; 0 = the whole volume.
  // Stages of the same stageGroup (>= 0) pass their slabs on directly; elsewhere a slab is cut
  // from (scatter) or a whole tensor is gathered onto the consumer's device.
  int shardDim = 0;
  std::vector<std::int64_t> stageSlab;  // per stage (empty: nothing sharded)
  std::vector<int> stageGroup;          // per stage; -1 unsharded
  std::vector<int> stageShards;         // per stage: its number of slabs (1 unsharded)
};

struct SimStage {
  std::int64_t parameters = 0;
  std::int64_t activationBytes = 0;
  std::int64_t transferBytes = 0;
  std::int64_t outputBytes = 0;
  std::int64_t offloadBytes = 0;       // host memory holding its offloaded inputs
  std::int64_t backwardPeak = 0;       // tensors only (no allowance)
  std::int64_t backwardTransient = 0;
  double flops = 0;
};

struct SimDevice {
  std::int64_t peak = 0;               // tensors only
  int peakStage = -1;
  Phase peakPhase = Phase::Setup;
  std::int64_t persistent = 0;
  std::int64_t endOfForward = 0;       // memory when forward (with the loss) is done
};

struct SimResult {
  std::vector<SimStage> stages;
  std::vector<SimDevice> devices;
  std::int64_t bytesMoved = 0;
};

SimResult simulateStep(const SimRequest& request);

} // namespace splitseg::planner::detail
