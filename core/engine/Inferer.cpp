#include "core/engine/Inferer.h"
#include "core/shard/HaloConv3d.h"
#include "core/engine/Tensors.h"
#include "core/base/Error.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/OptimizerStep.h"
#include "core/base/Units.h"
#include "core/planner/InferenceMemory.h"

#include <torch/torch.h>

#include <cmath>

namespace splitseg::engine {

namespace {
using torch::indexing::Slice;

std::int64_t roundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }
} // namespace

torch::Tensor gaussianWindow(const std::array<std::int64_t, 3>& w, double sigmaScale) {
  // The same map as MONAI's sliding_window_inference (1.6): centred at (w-1)/2, not
  // normalised, floored at 1e-3 so window borders still count a little.
  std::vector<torch::Tensor> axes;
  for (int a = 0; a < 3; ++a) {
    auto x = torch::arange(w[a], torch::kFloat) - static_cast<double>(w[a] - 1) / 2.0;
    const double sigma = w[a] * sigmaScale;
    axes.push_back(torch::exp(-x.pow(2) / (2.0 * sigma * sigma)));
  }
  auto g = axes[0].view({-1, 1, 1}) * axes[1].view({1, -1, 1}) * axes[2].view({1, 1, -1});
  return torch::clamp_min(g, std::max(g.min().item<float>(), 1e-3f));
}

torch::Tensor Inferer::runPadded(const torch::Tensor& batch) {
  // Pad each spatial size up to the network's divisor, run, crop back.
  const auto div = network().sizeDivisor();
  const auto d = batch.size(2), h = batch.size(3), w = batch.size(4);
  const auto pd = roundUp(d, div) - d, ph = roundUp(h, div) - h, pw = roundUp(w, div) - w;
  torch::Tensor x = batch;
  if (pd || ph || pw) x = torch::constant_pad_nd(batch, {0, pw, 0, ph, 0, pd}, 0.0);
  auto logits = executor_ ? executor_->forward(x.to(executor_->inputDevice())) : forward_->forward(x);
  return logits.index({Slice(), Slice(), Slice(0, d), Slice(0, h), Slice(0, w)}).to(torch::kCPU);
}

InferOptions inferOptionsOf(const run::RunSpec& run) {
  InferOptions o;
  o.window = run.window;
  o.overlap = run.overlap;
  o.mirror = run.mirror;
  return o;
}

torch::Tensor Inferer::runMirrored(const torch::Tensor& batch, const std::array<bool, 3>& mirror,
                                   CancelToken* cancel) {
  // As nnU-Net v2 (predict_sliding_window_return_logits): the mean of the logits over every
  // combination of flips, each flipped back. Tensor dims: x = W (4), y = H (3), z = D (2). The
  // planner counts the flipped input and the running sum beside a pass (InferenceMemory.h).
  std::vector<std::int64_t> axes;
  for (int a = 0; a < 3; ++a)
    if (mirror[static_cast<std::size_t>(a)]) axes.push_back(4 - a);
  torch::Tensor sum = runPadded(batch);
  if (axes.empty()) return sum;
  const int combos = 1 << axes.size();
  for (int m = 1; m < combos; ++m) {
    if (cancel) cancel->pausePoint();
    std::vector<std::int64_t> dims;
    for (std::size_t i = 0; i < axes.size(); ++i)
      if ((m >> i) & 1) dims.push_back(axes[i]);
    sum.add_(runPadded(batch.flip(dims)).flip(dims));
  }
  return sum.div_(combos);
}

Prediction Inferer::predict(const torch::Tensor& imageIn, const InferOptions& o, ProgressSink* progress,
                            CancelToken* cancel) {
  if (imageIn.dim() != 4) throw InvalidArgument("inference input must be (channels, D, H, W)");
  if (imageIn.size(0) != network().inChannels())
    throw InvalidArgument("image has " + std::to_string(imageIn.size(0)) + " channels, the network expects " +
                          std::to_string(network().inChannels()));
  // An allocation refused outside a stage (the check below, the windows, the logits' sum; a
  // stage's own are named by the SplitExecutor) is named here, and a CPU budget exceeded without
  // the host caching allocator (which refuses at allocation time) is caught after the pass.
  CpuMemoryCounter* counter = activeCpuMemoryCounter();
  const bool exceededBefore = counter && counter->exceeded();
  const bool whole = o.window[0] <= 0 || o.window[1] <= 0 || o.window[2] <= 0;
  const std::string where = whole ? "whole volume" : "sliding window";
  const auto checkBudget = [&] {
    if (counter && !exceededBefore && counter->exceeded())
      throw OutOfMemoryError("cpu", where, "allocation beyond the CPU budget of " + formatBytes(double(counter->budget())));
  };
  try {
    if (!torch::isfinite(imageIn).all().item<bool>()) throw InvalidArgument("image contains NaN or infinite values");
    return predictUnchecked(imageIn, o, progress, cancel, checkBudget);
  } catch (const c10::OutOfMemoryError& e) {
    const std::string m = e.what_without_backtrace();
    const bool cuda = m.find("CUDA") != std::string::npos && executor_ && executor_->inputDevice().is_cuda();
    throw OutOfMemoryError(cuda ? executor_->inputDevice().str() : "cpu", where, m);
  }
}

Prediction Inferer::predictUnchecked(const torch::Tensor& imageIn, const InferOptions& o, ProgressSink* progress,
                                     CancelToken* cancel, const std::function<void()>& checkBudget) {
  // Before InferenceMode, so the converted weights are normal tensors and training can go on
  // with them after the layout is restored (the guard ends after InferenceMode's).
  struct ChannelsLastScope {
    SplitExecutor* executor;
    bool on;
    ~ChannelsLastScope() {
      if (on) executor->setCpuChannelsLast(false);
    }
  } channelsLast{executor_, executor_ && o.cpuChannelsLast && !c10::InferenceMode::is_enabled() &&
                                !executor_->cpuChannelsLast()};
  if (channelsLast.on) executor_->setCpuChannelsLast(true);
  c10::InferenceMode inferenceMode;  // no autograd bookkeeping at all
  shard::OneDnnInferenceScope oneDnn;  // one window's small convolutions: oneDNN, not vol2col
  auto& net = network().root();
  const EvalModeGuard evalMode(net);  // back in its mode on every exit, out of memory included
  const torch::Tensor image = imageIn.to(torch::kFloat).contiguous();
  const std::array<std::int64_t, 3> size{image.size(1), image.size(2), image.size(3)};  // D, H, W

  const int passes = run::mirrorPasses(o.mirror);
  const std::string mirrored = passes > 1 ? ", " + std::to_string(passes) + " mirrored passes each" : "";
  torch::Tensor logits;
  const bool whole = o.window[0] <= 0 || o.window[1] <= 0 || o.window[2] <= 0;
  if (whole) {
    if (progress) progress->progress(0.0, "whole-volume prediction" + mirrored);
    logits = runMirrored(image.unsqueeze(0), o.mirror, cancel).squeeze(0);
    checkBudget();
    auto probs = probabilitiesFromLogits(logits.unsqueeze(0)).squeeze(0);
    if (progress) progress->progress(1.0, "done");
    return {probs, labelsFromLogits(logits.unsqueeze(0)).squeeze(0)};
  }

  // Window given as x, y, z; tensors are (D=z, H=y, W=x). Smaller volumes are padded up to it;
  // the planner cuts the same windows (planner::inferenceGrid).
  const auto grid = planner::inferenceGrid(size, {o.window[2], o.window[1], o.window[0]}, network().sizeDivisor(),
                                             o.overlap);
  const auto& win = grid.window;
  const auto& padded = grid.padded;
  torch::Tensor x = image;
  if (padded != size)
    x = torch::constant_pad_nd(image, {0, padded[2] - size[2], 0, padded[1] - size[1], 0, padded[0] - size[0]}, 0.0);

  const auto importance = o.gaussian ? gaussianWindow(win, o.sigmaScale) : torch::ones({win[0], win[1], win[2]});
  const auto outC = network().outChannels();
  auto sum = torch::zeros({outC, padded[0], padded[1], padded[2]}, torch::kFloat);
  auto weight = torch::zeros({padded[0], padded[1], padded[2]}, torch::kFloat);

  const auto& origins = grid.origins;

  const std::size_t batch = static_cast<std::size_t>(std::max(1, o.batch));
  for (std::size_t first = 0; first < origins.size(); first += batch) {
    if (cancel) cancel->pausePoint();
    const std::size_t last = std::min(origins.size(), first + batch);
    std::vector<torch::Tensor> crops;
    for (std::size_t i = first; i < last; ++i) {
      const auto& p = origins[i];
      crops.push_back(x.index({Slice(), Slice(p[0], p[0] + win[0]), Slice(p[1], p[1] + win[1]),
                               Slice(p[2], p[2] + win[2])}));
    }
    auto probs = probabilitiesFromLogits(runMirrored(torch::stack(crops), o.mirror, cancel));
    checkBudget();
    for (std::size_t i = first; i < last; ++i) {
      const auto& p = origins[i];
      auto region = std::vector<at::indexing::TensorIndex>{Slice(), Slice(p[0], p[0] + win[0]),
                                                           Slice(p[1], p[1] + win[1]), Slice(p[2], p[2] + win[2])};
      sum.index(region).add_(probs[static_cast<std::int64_t>(i - first)] * importance);
      weight.index({Slice(p[0], p[0] + win[0]), Slice(p[1], p[1] + win[1]), Slice(p[2], p[2] + win[2])})
          .add_(importance);
    }
    if (progress)
      progress->progress(double(last) / double(origins.size()),
                         "window " + std::to_string(last) + "/" + std::to_string(origins.size()) + mirrored);
  }
  auto probs = (sum / weight.unsqueeze(0))
                   .index({Slice(), Slice(0, size[0]), Slice(0, size[1]), Slice(0, size[2])})
                   .contiguous();
  torch::Tensor labels = outC == 1 ? (probs[0] > 0.5).to(torch::kLong) : probs.argmax(0);
  return {probs, labels};
}

std::int64_t predictLabelsImageBytes(const Volume& source, const Preprocessing& preprocessing) {
  return preprocessing.networkGrid(source.geometry()).voxelCount() * std::int64_t{sizeof(float)};
}

Volume predictLabels(Inferer& inferer, const Volume& source, const Preprocessing& preprocessing,
                     const InferOptions& options, ProgressSink* progress, CancelToken* cancel) {
  // Beside the Inferer's buffers (what the planner counts) the image is held once: the
  // preprocessed volume becomes the tensor without a copy. After the pass only the labels go on
  // (the probabilities are let go), converted straight into a volume and moved through restore
  // (the resident peak this saves: docs/calibration.md, "Inference").
  Geometry grid;
  torch::Tensor image;
  {
    Volume input = preprocessing.applyToImage(source);
    grid = input.geometry();
    image = toTensor(std::move(input)).unsqueeze(0);
  }
  torch::Tensor labels = inferer.predict(image, options, progress, cancel).labels;
  image = torch::Tensor();
  Volume onGrid = toVolume(labels, grid);
  labels = torch::Tensor();
  Volume restored = preprocessing.restore(std::move(onGrid), source.geometry(), Interpolation::Nearest);
  restored.setPixelType("uint8");
  return restored;
}

} // namespace splitseg::engine
