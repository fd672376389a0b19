#pragma once
// Whole-volume and sliding-window prediction (window, overlap, Gaussian weighting as
// nnU-Net/MONAI) through a SplitExecutor.
#include "core/base/CancelToken.h"
#include "core/base/Progress.h"
#include "core/engine/SplitExecutor.h"
#include "core/run/RunSpec.h"
#include "core/volume/Preprocessing.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace splitseg::engine {

struct InferOptions {
  std::array<std::int64_t, 3> window{0, 0, 0};  // x, y, z; 0 = whole volume in one pass
  double overlap = 0.5;
  bool gaussian = true;
  double sigmaScale = 0.125;                    // Gaussian sigma = window * sigmaScale
  int batch = 1;                                // windows per forward pass
  bool cpuChannelsLast = true;                  // CPU stages' weights in NDHWC while predicting (faster)
  // Test-time mirroring (nnU-Net's default at inference): each pass runs again on every combination
  // of flips along these axes (x, y, z) and the logits are averaged; all three: 8 passes.
  std::array<bool, 3> mirror{false, false, false};
};

// The run's window, overlap and mirroring (one home for the CLI and the workstation); the
// windows per pass stay 1 for the caller to set.
InferOptions inferOptionsOf(const run::RunSpec& run);

struct Prediction {
  torch::Tensor probabilities;  // (C, D, H, W) float32 on CPU; C == 1 for binary
  torch::Tensor labels;         // (D, H, W) int64 on CPU
};

// What the Inferer runs batches of windows through when it is not a SplitExecutor in this process:
// the ranks of a run over several processes (ranks::PipelineInferer).
class WindowForward {
public:
  virtual ~WindowForward() = default;
  // (N, Cin, d, h, w) on the CPU -> logits (N, C, d, h, w), fp32, on any device.
  virtual torch::Tensor forward(const torch::Tensor& batch) = 0;
  virtual model::StagedNetwork& network() = 0;
  // The other processes' measured memory peaks (ranks::PeakMeter, the planner's device names) since
  // they started serving or since the last call, their meters then started again: one prediction's
  // peaks at a time (`infer --dataset` over ranks, per case). Between passes only.
  virtual std::map<std::string, std::int64_t> restartOtherPeaks() { return {}; }
};

class Inferer {
public:
  explicit Inferer(SplitExecutor& executor) : executor_(&executor) {}
  explicit Inferer(WindowForward& forward) : forward_(&forward) {}
  // image: (Cin, D, H, W) float on CPU. Pads to the network's size divisor where needed. Out of
  // memory (a device's, or the CPU budget of the CpuMemoryCounter active on this thread, e.g.
  // ranks::PeakMeter's) is an OutOfMemoryError naming the device and the stage, or the sliding
  // window / whole volume when no stage ran.
  Prediction predict(const torch::Tensor& image, const InferOptions& options,
                     ProgressSink* progress = nullptr, CancelToken* cancel = nullptr);
  // Over ranks, WindowForward::restartOtherPeaks; in one process, none.
  std::map<std::string, std::int64_t> restartOtherPeaks() { return forward_ ? forward_->restartOtherPeaks() : std::map<std::string, std::int64_t>{}; }

private:
  Prediction predictUnchecked(const torch::Tensor& image, const InferOptions& options, ProgressSink* progress,
                              CancelToken* cancel, const std::function<void()>& checkBudget);
  torch::Tensor runPadded(const torch::Tensor& batch);  // (N, Cin, d, h, w) -> logits cropped back
  // runPadded, averaged over the mirrored copies `mirror` asks for (InferOptions::mirror).
  torch::Tensor runMirrored(const torch::Tensor& batch, const std::array<bool, 3>& mirror, CancelToken* cancel);
  model::StagedNetwork& network() { return executor_ ? executor_->network() : forward_->network(); }
  SplitExecutor* executor_ = nullptr;
  WindowForward* forward_ = nullptr;
};

// A whole image through the run's preprocessing and the network, and its labels back onto the
// image's own grid (nearest neighbour): what `splitseg-cli infer --image` writes and what the
// workstation's review shows. source: one channel; labels as uint8 in source's geometry.
Volume predictLabels(Inferer& inferer, const Volume& source, const Preprocessing& preprocessing,
                     const InferOptions& options, ProgressSink* progress = nullptr, CancelToken* cancel = nullptr);

// The image predictLabels hands the Inferer (one float channel on the network's grid): no LibTorch
// allocation, but the planner counts it as the Inferer's image.
std::int64_t predictLabelsImageBytes(const Volume& source, const Preprocessing& preprocessing);

// Gaussian importance map for a window (D, H, W), as MONAI's (floor 1e-3).
torch::Tensor gaussianWindow(const std::array<std::int64_t, 3>& windowZyx, double sigmaScale);

} // namespace splitseg::engine
