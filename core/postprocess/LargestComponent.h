#pragma once
// Post-processing of a predicted segmentation as nnU-Net's "remove all but the largest
// component": for each foreground label, only its largest 26-connected component is kept and
// the label's other voxels become background. A false positive far from the organ goes; a
// second true region would go too, which is why it is an option.
#include "core/volume/Volume.h"

#include <cstdint>
#include <vector>

namespace splitseg::postprocess {

struct LabelComponents {
  int label = 0;
  std::int64_t components = 0;  // 26-connected regions of the label before
  std::int64_t kept = 0;        // voxels of the largest, kept
  std::int64_t removed = 0;     // voxels set to background
};

// Labels are the voxels' integer values (0: background; values 1..255). Ties keep the region
// met first in x-fastest order. Returns one entry per foreground label present, in label order.
// Throws InvalidArgument for a value that is not an integer in 0..255.
std::vector<LabelComponents> keepLargestComponents(Volume& labels);

} // namespace splitseg::postprocess
