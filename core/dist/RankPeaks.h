#pragma once
// What a rank's tensors took at most while it served inference, by the planner's device names
// ("r1:cpu", "r1:cuda:0"), allowances excluded: CUDA's allocator peak, and on the CPU every
// LibTorch allocation of the serving thread (engine::CpuMemoryCounter) plus the CPU parameters of
// the rank's stages, which existed before, as the planner counts them. The other ranks send theirs
// to rank 0 when it lets them go, so that `infer` over ranks reports every rank's peak beside the plan.
#include "core/dist/Comm.h"
#include "core/engine/MemoryMeter.h"

#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace splitseg::dist {

using DevicePeaks = std::map<std::string, std::int64_t>;

class ServeMeter {
public:
  // Starts counting on this thread (CUDA peaks reset) for the devices `rank` runs on; `modules`
  // are the rank's stages (their CPU parameters are counted as held throughout).
  ServeMeter(int rank, const std::vector<torch::Device>& devices, const std::vector<torch::nn::Module*>& modules);
  ~ServeMeter();
  ServeMeter(const ServeMeter&) = delete;
  ServeMeter& operator=(const ServeMeter&) = delete;
  DevicePeaks peaks() const;

private:
  int rank_;
  std::int64_t cpuParameters_ = 0;
  engine::MemoryMeter meter_;
  std::unique_ptr<engine::CpuMemoryScope> scope_;
};

// A rank other than 0: its peaks to rank 0 (under `tag`). Rank 0: every other rank's, merged.
void sendPeaks(Comm& comm, const DevicePeaks& peaks, int tag);
DevicePeaks receivePeaks(Comm& comm, int tag);

} // namespace splitseg::dist
