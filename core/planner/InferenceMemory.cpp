#include "core/planner/InferenceMemory.h"
#include "core/base/Error.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace splitseg::planner {

namespace {
std::int64_t roundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }
std::int64_t voxels(const std::array<std::int64_t, 3>& d) { return d[0] * d[1] * d[2]; }
} // namespace

std::vector<std::int64_t> windowStarts(std::int64_t size, std::int64_t window, double overlap) {
  if (size <= window) return {0};
  const auto stride = std::max<std::int64_t>(1, static_cast<std::int64_t>(window * (1.0 - overlap)));
  const auto count = static_cast<std::int64_t>(std::ceil(double(size - window) / double(stride))) + 1;
  std::vector<std::int64_t> s;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto p = std::min(i * stride, size - window);
    if (s.empty() || s.back() != p) s.push_back(p);
  }
  return s;
}

InferenceGrid inferenceGrid(const std::array<std::int64_t, 3>& volume, const std::array<std::int64_t, 3>& windowZyx,
                            std::int64_t divisor, double overlap) {
  for (auto n : volume)
    if (n < 1) throw InvalidArgument("inference: the volume has an empty side");
  InferenceGrid g;
  g.whole = windowZyx[0] <= 0 || windowZyx[1] <= 0 || windowZyx[2] <= 0;
  if (g.whole) {
    for (int a = 0; a < 3; ++a) g.window[a] = g.padded[a] = roundUp(volume[a], divisor);
    g.origins = {{0, 0, 0}};
    return g;
  }
  for (auto w : windowZyx)
    if (w % divisor != 0)
      throw InvalidArgument("window size " + std::to_string(w) + " must be a multiple of " + std::to_string(divisor));
  // A window larger than the volume shrinks to it (rounded up to the divisor): a volume that
  // fits one window is then predicted exactly as the whole-volume path does.
  for (int a = 0; a < 3; ++a) {
    g.window[a] = std::min(windowZyx[a], roundUp(volume[a], divisor));
    g.padded[a] = std::max(volume[a], g.window[a]);
  }
  for (auto z : windowStarts(g.padded[0], g.window[0], overlap))
    for (auto y : windowStarts(g.padded[1], g.window[1], overlap))
      for (auto x : windowStarts(g.padded[2], g.window[2], overlap)) g.origins.push_back({z, y, x});
  return g;
}

// Follows Inferer::predict's statements (their temporaries die at the end of each full
// expression); InferencePlanTest checks the sums against every LibTorch allocation it makes.
InferenceHost inferenceHost(const InferenceGrid& g, const std::array<std::int64_t, 3>& volume, int windowsPerPass,
                            std::int64_t inChannels, std::int64_t outChannels, bool mirror) {
  const std::int64_t S = voxels(volume), P = voxels(g.padded), W = voxels(g.window), C = outChannels;
  const std::int64_t B = std::min<std::int64_t>(std::max(1, windowsPerPass), static_cast<std::int64_t>(g.origins.size()));
  // Labels: argmax's int64 map; one channel thresholds to a bool map first, then int64.
  const std::int64_t labels = S * (C == 1 ? 9 : 8);
  InferenceHost h;
  h.image = inChannels * S * 4;
  if (g.whole) {
    // runPadded: the padded copy (when the volume is not a multiple of the divisor) is the pass's
    // input; the logits come back cropped, then probabilities and labels are made from them.
    h.base = h.image;
    h.batch = P != S ? inChannels * P * 4 : 0;
    h.logits = C * P * 4;
    h.afterPass = h.base + h.logits + C * S * 4 + labels;
    h.end = h.afterPass;
    if (mirror) {
      // The flipped image (then padded as a plain pass's input) and the sum of the logits; after
      // the pass the network's logits and their flipped crop beside them.
      h.mirrorPass = inChannels * S * 4 + h.logits;
      h.mirrorAfter = h.base + inChannels * S * 4 + 2 * h.logits + C * S * 4;
    }
    return h;
  }
  const bool pad = P != S;
  // The padded copy, the Gaussian importance map, the weighted sums and their weights.
  h.base = h.image + (pad ? inChannels * P * 4 : 0) + W * 4 + C * P * 4 + P * 4;
  h.batch = B * inChannels * W * 4;
  h.logits = B * C * W * 4;
  // Probabilities beside the stacked windows and logits; then one window's weighted copy.
  h.afterPass = h.base + std::max(h.batch + 2 * h.logits, h.logits + C * W * 4);
  // sum / weight (cropped to the volume when padded), then the labels beside the probabilities.
  const std::int64_t probs = C * S * 4, divided = C * P * 4;
  h.end = h.base + std::max(divided + (pad ? probs : 0), (pad ? probs : divided) + labels);
  if (mirror) {
    // The flipped windows and the sum of the logits; after the pass the stacked and flipped
    // windows, the sum, the network's logits and their flipped copy.
    h.mirrorPass = h.batch + h.logits;
    h.mirrorAfter = h.base + 2 * h.batch + 3 * h.logits;
  }
  return h;
}

} // namespace splitseg::planner
