#pragma once
// Inference's side of the planner: the windows engine::Inferer::predict cuts a volume into (one
// home: the Inferer cuts them with inferenceGrid too), and the host memory it holds beside the
// network — the image, the accumulators, a pass's windows, logits and probabilities. The
// network's own memory during a pass comes from the step replay run forward only
// (StepSimulator, SimRequest::inference).
#include <array>
#include <cstdint>
#include <vector>

namespace splitseg::planner {

struct InferenceGrid {
  bool whole = true;                 // one pass over the whole volume (no window given)
  std::array<std::int64_t, 3> window{};  // D, H, W of a pass's input (whole: the volume rounded up to the divisor)
  std::array<std::int64_t, 3> padded{};  // windows: the volume padded up to the window
  std::vector<std::array<std::int64_t, 3>> origins;  // windows' corners (whole: one at 0)
};

// `windowZyx`: D, H, W of the window, zeros for the whole volume. A window larger than the volume
// shrinks to it (rounded up to `divisor`). Throws InvalidArgument for a window that is not a
// multiple of `divisor` or a volume with an empty side.
InferenceGrid inferenceGrid(const std::array<std::int64_t, 3>& volume, const std::array<std::int64_t, 3>& windowZyx,
                            std::int64_t divisor, double overlap);

// Window start positions along one axis covering [0, size) (as MONAI's scan intervals).
std::vector<std::int64_t> windowStarts(std::int64_t size, std::int64_t window, double overlap);

// The host memory Inferer::predict holds beside the network's tensors, in bytes, at the three
// moments it can peak (traced with engine::CpuMemoryCounter, see InferencePlanTest):
struct InferenceHost {
  std::int64_t image = 0;     // the image itself (the caller's, float)
  std::int64_t base = 0;      // what lives through every pass, image included (windows: padded copy, Gaussian map, sums)
  std::int64_t batch = 0;     // a pass's windows stacked (whole: the padded copy of the image, 0 when none)
  std::int64_t logits = 0;    // a pass's fp32 logits
  std::int64_t afterPass = 0; // peak after the forward (logits, probabilities, weighted sum), base included
  std::int64_t end = 0;       // peak while the probabilities and labels are made, base included
  // Test-time mirroring (engine::InferOptions::mirror): a mirrored pass holds, beside what a plain
  // one does, the flipped input and the running sum of the logits (mirrorPass); after it, the
  // flipped logits beside the sum (mirrorAfter, base included). Zero without mirroring.
  std::int64_t mirrorPass = 0;
  std::int64_t mirrorAfter = 0;
};
InferenceHost inferenceHost(const InferenceGrid& grid, const std::array<std::int64_t, 3>& volume, int windowsPerPass,
                            std::int64_t inChannels, std::int64_t outChannels, bool mirror = false);

} // namespace splitseg::planner
