#pragma once
// Predictions of image files scored against their ground truth, one case or a dataset's:
// `splitseg-cli infer --image --label`, `infer --dataset` and the workstation's Evaluate dataset
// all go through here, so that what is read, written, scored and summarised is the same. The
// prediction itself is the caller's (a callback): this layer holds no network.
#include "core/dataset/Dataset.h"
#include "core/metrics/SegmentationMetrics.h"
#include "core/postprocess/LargestComponent.h"
#include "core/volume/Volume.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace splitseg::evaluate {

// Which of a dataset's cases: all, or one side of the split training makes (the same fraction
// and seed dataset::DatasetSource splits with).
enum class CaseSet { All, Validation, Training };
CaseSet caseSetFromString(const std::string& text);  // "all" | "validation" | "training"; throws InvalidArgument
const char* toString(CaseSet cases);

struct CaseFiles {
  std::string id;
  std::string image;
  std::string label;       // "" when there is no ground truth
  std::string prediction;  // where the labels are written
};

struct EvaluationPlan {
  std::string dataset;  // its name
  std::string root;
  CaseSet cases = CaseSet::All;
  std::string outDir;
  std::vector<CaseFiles> files;  // in the dataset's order
};

// The chosen cases of the dataset at `folder` and their prediction files, `<outDir>/<case>.nii.gz`.
// Refused before anything is written (InvalidArgument, FormatError): more than one input channel,
// a split that leaves no case, `outDir` a file, a case id that is no file name, two cases of one
// name, a prediction that would overwrite one of the dataset's own files.
EvaluationPlan planEvaluation(const dataset::Dataset& ds, CaseSet cases, double validationFraction, const std::string& outDir);

// Measured tensor peak per device over one prediction, by the planner's device names ("cpu",
// "cuda:0", over ranks "r1:cpu"; ranks::PeakMeter): empty when the caller did not measure.
using DevicePeaks = std::map<std::string, std::int64_t>;

// The labels of `source` (uint8, on its own grid) as the run predicts them, what the prediction
// took on each device and what the planner expected it to take (allowances excluded).
struct Predicted {
  // Implicit: a callback that returns labels alone did not measure.
  Predicted(Volume l, DevicePeaks measured = {}, DevicePeaks planned = {})
      : labels(std::move(l)), peakBytes(std::move(measured)), plannedBytes(std::move(planned)) {}
  Volume labels;
  DevicePeaks peakBytes;
  DevicePeaks plannedBytes;
};
using Predict = std::function<Predicted(const Volume& source)>;

struct CaseResult {
  CaseFiles files;
  double seconds = 0;  // the prediction alone (reading, writing and scoring excluded)
  std::vector<postprocess::LabelComponents> kept;  // with keepLargest
  std::vector<metrics::LabelMetrics> metrics;       // with a ground truth
  double meanDice = 0;                              // over metrics' labels (1 when both maps are empty)
  DevicePeaks peakBytes;                            // as Predicted's (summary.json's "memory": "measured")
  DevicePeaks plannedBytes;                         // as Predicted's ("memory": "planned")
  std::string error;                                // a case that failed (evaluateDataset only)
  bool ok() const { return error.empty(); }
};

// One image: its ground truth checked first (a label of another grid throws InvalidArgument before
// anything is predicted), predicted, with `keepLargest` each label's largest region kept, written to
// files.prediction in the image's geometry, and scored as written (Dice, HD95 per label).
CaseResult predictCase(const CaseFiles& files, const Predict& predict, bool keepLargest);

struct EvaluationObserver {
  virtual ~EvaluationObserver() = default;
  virtual void caseStarted(std::size_t /*index*/, const CaseFiles& /*files*/) {}
  virtual void caseFinished(std::size_t /*index*/, const CaseResult& /*result*/) {}
};

struct EvaluationSummary {
  std::vector<CaseResult> cases;  // every case, failed ones with their error
  std::vector<metrics::LabelSummary> labels;
  double meanDice = 0;            // over labels' mean Dice (0 when none)
  int failed = 0;
  double seconds = 0;
  nlohmann::json line;            // what summary.json holds but the per-case list
  std::string summaryPath;
};

// Every case of `plan` through predictCase. A case that cannot be read, whose label is on another
// grid or that runs out of memory is recorded with its error and the others go on; Cancelled (and
// anything else) propagates, leaving the predictions written so far and no summary. summary.json
// (as nnU-Net's evaluation: per label and per case) is written atomically beside the predictions,
// with `runFields` (placement, window, ...) merged into its top level.
EvaluationSummary evaluateDataset(const EvaluationPlan& plan, const Predict& predict, bool keepLargest,
                                  const nlohmann::json& runFields, EvaluationObserver* observer = nullptr);

// An evaluation read back from the summary.json evaluateDataset wrote (Evaluate dataset's Open
// results…): its cases (those predicted in the file's order, then the failed ones), their metrics
// and the per-label summary. Each prediction is taken to be <case>.nii.gz beside the summary file
// (a moved folder still opens; nothing outside it is named). The file may come from someone else:
// at most 64 MiB, every field's type checked, case ids plain file names, at most 100000 cases, at
// most 64 devices a case with names of at most 64 characters;
// anything else is a FormatError naming the file and the field.
struct SavedEvaluation {
  EvaluationPlan plan;
  EvaluationSummary summary;
};
SavedEvaluation readEvaluation(const std::string& summaryPath);

// Per label: label, dice, hd95_mm ("inf" when infinite), voxel counts.
nlohmann::json metricsJson(const std::vector<metrics::LabelMetrics>& metrics);
nlohmann::json keptJson(const std::vector<postprocess::LabelComponents>& kept);
// "inf" for an infinite distance (JSON has no infinity).
nlohmann::json distanceJson(double mm);

} // namespace splitseg::evaluate
