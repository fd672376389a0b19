#pragma once
// What a rank's tensors took at most while it served inference (or one process's, or rank 0's, while it predicted), by the planner's device names
// ("r1:cpu", "r1:cuda:0"), allowances excluded: CUDA's allocator peak, and on the CPU every
// LibTorch allocation of the serving thread (engine::CpuMemoryCounter) plus the CPU parameters of
// the rank's stages, which existed before, as the planner counts them. The other ranks send theirs
// to rank 0 when it lets them go, so that `infer` over ranks reports every rank's peak beside the plan.
#include "core/ranks/Comm.h"
#include "core/engine/Inferer.h"
#include "core/engine/MemoryMeter.h"
#include "core/model/StagedNetwork.h"
#include "core/placement/Placement.h"

#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace splitseg::ranks {

using DevicePeaks = std::map<std::string, std::int64_t>;

class PeakMeter {
public:
  // Starts counting on this thread (CUDA peaks reset) for the devices `modules` run on (the CPU
  // always: the windows and the Inferer's buffers live there); their CPU parameters are counted as
  // held throughout. `rank` >= 0 names the devices as the planner names a rank's ("r1:cpu"),
  // else as one process's ("cpu"). cpuBudget > 0 (the run's CPU budget, RunSpec::cpuBudgetBytes)
  // bounds the CPU figure peaks() reports, the one the planner plans within that budget: with the
  // host caching allocator installed an allocation beyond it is refused (c10::OutOfMemoryError,
  // which the Inferer names), without it the Inferer sees it after the pass (exceeded()).
  PeakMeter(int rank, const std::vector<torch::nn::Module*>& modules, std::int64_t cpuBudget = 0);
  ~PeakMeter();
  PeakMeter(const PeakMeter&) = delete;
  PeakMeter& operator=(const PeakMeter&) = delete;
  DevicePeaks peaks() const;
  // Host memory that exists throughout without a LibTorch allocation while the meter runs: the
  // image the Inferer takes from its caller, which the planner counts (engine::predictLabels
  // hands it over without a copy). Counted within the budget: an OutOfMemoryError ("cpu", stage
  // "input") when the weights and what is held already take more.
  void holdOnCpu(std::int64_t bytes);

private:
  void hold(std::int64_t bytes);  // counted on the CPU as allocated; OutOfMemoryError past the budget
  int rank_;
  std::int64_t cpuParameters_ = 0;
  std::int64_t heldOnCpu_ = 0;
  std::unique_ptr<engine::MemoryMeter> meter_;
  std::unique_ptr<engine::CpuMemoryScope> scope_;
};

// What this process's PeakMeter takes when it predicts: the stages it runs (every stage in one
// process; over ranks rank 0's, a device without a rank counting as rank 0's) and the rank its
// devices are named with: 0 where the placement names "r0:...", else -1 ("cpu", as the planner
// then names rank 0's devices).
struct LocalStages {
  std::vector<torch::nn::Module*> modules;
  int namedRank = -1;
};
LocalStages localStages(model::StagedNetwork& network, const placement::Placement& placement, bool distributed);

// engine::predictLabels measured as the planner counts it: a PeakMeter over this process's stages
// (`local`) within `cpuBudget` (the run's), the image the Inferer takes held. `peaks` gets this
// process's; the other ranks' are the caller's (Inferer::restartOtherPeaks, or at the run's end).
// The one way Review, Evaluate dataset and `infer` measure a prediction.
Volume predictLabelsMeasured(engine::Inferer& inferer, const LocalStages& local, const Volume& source,
                             const Preprocessing& preprocessing, const engine::InferOptions& options,
                             std::int64_t cpuBudget, DevicePeaks& peaks, ProgressSink* progress = nullptr,
                             CancelToken* cancel = nullptr);

// c10's out-of-memory on a rank as the engine's OutOfMemoryError, naming the device as the planner
// names this rank's: the CUDA device when CUDA's allocator refused (`device`, or the GPU its message
// names), else the CPU (the run's CPU budget, refused by the host caching allocator).
[[noreturn]] void rethrowOutOfMemory(const c10::OutOfMemoryError& e, int rank, const torch::Device& device,
                                     const std::string& stage);
[[noreturn]] void rethrowOutOfMemory(const c10::OutOfMemoryError& e, int rank, const std::string& stage);

// A rank other than 0: its peaks to rank 0 (under `tag`). Rank 0: every other rank's, merged.
void sendPeaks(Comm& comm, const DevicePeaks& peaks, int tag);
DevicePeaks receivePeaks(Comm& comm, int tag);

} // namespace splitseg::ranks
