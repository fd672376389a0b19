#pragma once
// Overlap and boundary metrics of a predicted label map against ground truth, per label:
// Dice and the 95th-percentile Hausdorff distance in mm (max of the two directed 95th
// percentiles of surface-to-surface distances, as MONAI), from exact Euclidean distance
// transforms with the volume's spacing. Std only; used by the workstation's review and the CLI.
#include "core/volume/Volume.h"

#include <vector>

namespace splitseg::metrics {

// The one Dice of the project: 2|P∩T| / (|P| + |T|) from voxel counts, 1 when both are empty.
// Training metrics (engine), review and the CLI all count voxels and call this.
double dice(std::int64_t overlap, std::int64_t predicted, std::int64_t truth);


struct LabelMetrics {
  int label = 0;
  double dice = 0;
  double hd95 = 0;            // mm; infinity when one side is empty and the other is not
  std::int64_t predicted = 0; // voxels
  std::int64_t truth = 0;
  std::int64_t falsePositive = 0;
  std::int64_t falseNegative = 0;
};

// One label over several cases (a dataset's predictions), as nnU-Net's evaluation summarises
// them: a case where the label is in neither map does not count (nnU-Net's NaN), Dice is the mean
// over the cases that count; HD95 the mean over those where it is finite (`infiniteHd95`: cases
// with the label on one side only).
struct LabelSummary {
  int label = 0;
  int cases = 0;
  double meanDice = 0;
  double meanHd95 = 0;
  int infiniteHd95 = 0;
};
// Labels ascending; `perCase` holds compute()'s result for each case.
std::vector<LabelSummary> summarize(const std::vector<std::vector<LabelMetrics>>& perCase);

class SegmentationMetrics {
public:
  // Labels 1..max over both maps. Both volumes must share a grid.
  static std::vector<LabelMetrics> compute(const Volume& predicted, const Volume& truth);
  static double dice(const Volume& predicted, const Volume& truth, int label);
  static double hd95(const Volume& predicted, const Volume& truth, int label);
  // 1 = true positive, 2 = false positive, 3 = false negative (all labels together).
  static Volume errorMap(const Volume& predicted, const Volume& truth);
  // Squared Euclidean distance (mm²) from every voxel to the nearest voxel where mask != 0.
  static std::vector<double> squaredDistanceTo(const std::vector<unsigned char>& mask, const Geometry& g);
};

} // namespace splitseg::metrics
