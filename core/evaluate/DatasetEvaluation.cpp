#include "core/evaluate/DatasetEvaluation.h"
#include "core/base/JsonText.h"

#include "core/base/Error.h"
#include "core/base/JsonReader.h"
#include "core/dataset/DatasetSource.h"
#include "core/io/AtomicWrite.h"
#include "core/io/SafePath.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

namespace splitseg::evaluate {

namespace fs = std::filesystem;

namespace {
// A case id that names one file in the predictions' folder (no path, not . or ..).
bool plainFileName(const std::string& id) {
  return !id.empty() && id != "." && id != ".." && id.find_first_of("/\\") == std::string::npos && id.size() <= 255;
}
} // namespace

CaseSet caseSetFromString(const std::string& text) {
  if (text == "all") return CaseSet::All;
  if (text == "validation") return CaseSet::Validation;
  if (text == "training") return CaseSet::Training;
  throw InvalidArgument("cases '" + text + "': expected all, validation or training");
}

const char* toString(CaseSet cases) {
  switch (cases) {
    case CaseSet::Validation: return "validation";
    case CaseSet::Training: return "training";
    case CaseSet::All: break;
  }
  return "all";
}

EvaluationPlan planEvaluation(const dataset::Dataset& ds, CaseSet cases, double validationFraction, const std::string& outDir) {
  if (ds.channelCount() != 1)
    throw InvalidArgument(ds.name + " has " + std::to_string(ds.channelCount()) + " input channels; only one-channel images are predicted");
  std::vector<std::size_t> idx;
  if (cases == CaseSet::All) {
    for (std::size_t i = 0; i < ds.cases.size(); ++i) idx.push_back(i);
  } else {
    const auto split = dataset::splitCases(ds.cases.size(), validationFraction, dataset::DatasetSourceOptions{}.splitSeed);
    idx = cases == CaseSet::Validation ? split.validation : split.train;
  }
  std::sort(idx.begin(), idx.end());
  if (idx.empty()) throw InvalidArgument(std::string("the ") + toString(cases) + " cases of " + ds.name + ": the split leaves none there");
  if (outDir.empty()) throw InvalidArgument("no folder given for the predictions");
  if (fs::exists(outDir) && !fs::is_directory(outDir)) throw InvalidArgument(outDir + " is a file; give a folder for the predictions");
  // Nothing the dataset holds may be overwritten: its images and labels by canonical path.
  std::set<std::string> inputs, ids;
  for (const auto& c : ds.cases) {
    for (const auto& im : c.images) inputs.insert(fs::weakly_canonical(im).string());
    if (!c.label.empty()) inputs.insert(fs::weakly_canonical(c.label).string());
  }
  EvaluationPlan plan;
  plan.dataset = ds.name;
  plan.root = ds.root;
  plan.cases = cases;
  plan.outDir = outDir;
  for (const auto i : idx) {
    const auto& c = ds.cases[i];
    if (!plainFileName(c.id))
      throw FormatError(ds.root, "case id '" + c.id + "' cannot name a prediction file");
    if (!ids.insert(c.id).second)
      throw FormatError(ds.root, "two cases are named '" + c.id + "': their predictions would overwrite each other");
    const fs::path p = fs::path(outDir) / (c.id + ".nii.gz");
    if (inputs.count(fs::weakly_canonical(p).string()))
      throw InvalidArgument(outDir + " would overwrite the dataset's own " + p.string() + "; choose another folder");
    plan.files.push_back({c.id, c.images.front(), c.label, p.string()});
  }
  return plan;
}

CaseResult predictCase(const CaseFiles& files, const Predict& predict, bool keepLargest) {
  CaseResult r;
  r.files = files;
  const Volume source = io::readVolume(files.image);
  std::optional<Volume> truth;
  if (!files.label.empty()) {
    truth = io::readVolume(files.label);
    if (!truth->geometry().sameGrid(source.geometry()))
      throw InvalidArgument("label " + files.label + " is not on the grid of " + files.image + " (size, spacing, origin or direction differ)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  Predicted predicted = predict(source);
  Volume labels = std::move(predicted.labels);
  r.peakBytes = std::move(predicted.peakBytes);
  r.plannedBytes = std::move(predicted.plannedBytes);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (keepLargest) r.kept = postprocess::keepLargestComponents(labels);
  io::writeSegmentation(labels, source.geometry(), files.prediction);
  if (truth) {
    // As written: on the source's grid, what a viewer shows against the ground truth.
    labels.geometry() = source.geometry();
    r.metrics = metrics::SegmentationMetrics::compute(labels, *truth);
    double sum = 0;
    for (const auto& m : r.metrics) sum += m.dice;
    r.meanDice = r.metrics.empty() ? 1.0 : sum / static_cast<double>(r.metrics.size());
  }
  return r;
}

nlohmann::json distanceJson(double mm) { return std::isfinite(mm) ? nlohmann::json(mm) : nlohmann::json("inf"); }

nlohmann::json metricsJson(const std::vector<metrics::LabelMetrics>& ms) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : ms)
    j.push_back({{"label", m.label},
                 {"dice", m.dice},
                 {"hd95_mm", distanceJson(m.hd95)},
                 {"predicted", m.predicted},
                 {"truth", m.truth},
                 {"false_positive", m.falsePositive},
                 {"false_negative", m.falseNegative}});
  return j;
}

nlohmann::json keptJson(const std::vector<postprocess::LabelComponents>& kept) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : kept) j.push_back({{"label", c.label}, {"components", c.components}, {"kept", c.kept}, {"removed", c.removed}});
  return j;
}

EvaluationSummary evaluateDataset(const EvaluationPlan& plan, const Predict& predict, bool keepLargest,
                                  const nlohmann::json& runFields, EvaluationObserver* observer) {
  fs::create_directories(plan.outDir);
  EvaluationSummary s;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<metrics::LabelMetrics>> scored;
  nlohmann::json perCase = nlohmann::json::array(), failures = nlohmann::json::array();
  for (std::size_t k = 0; k < plan.files.size(); ++k) {
    const auto& f = plan.files[k];
    if (observer) observer->caseStarted(k, f);
    CaseResult r;
    try {
      r = predictCase(f, predict, keepLargest);
    } catch (const IoError& e) {  // unreadable or corrupt input (FormatError too), or an unwritable output
      r.error = e.what();
    } catch (const InvalidArgument& e) {  // a label of another grid
      r.error = e.what();
    } catch (const OutOfMemoryError& e) {  // this case's volume is too large for the devices
      r.error = e.what();
    }
    r.files = f;
    if (r.ok()) {
      scored.push_back(r.metrics);
      perCase.push_back({{"case", f.id}, {"image", f.image}, {"label", f.label}, {"prediction", f.prediction},
                         {"seconds", r.seconds}, {"metrics", metricsJson(r.metrics)}, {"mean_dice", r.meanDice}});
      // As `infer`'s JSON lines carry them.
      if (!r.peakBytes.empty() || !r.plannedBytes.empty())
        perCase.back()["memory"] = {{"measured", r.peakBytes}, {"planned", r.plannedBytes}};
    } else {
      ++s.failed;
      failures.push_back({{"case", f.id}, {"error", r.error}});
    }
    s.cases.push_back(r);
    if (observer) observer->caseFinished(k, s.cases.back());
  }
  s.labels = metrics::summarize(scored);
  nlohmann::json labels = nlohmann::json::array();
  double foreground = 0;
  for (const auto& l : s.labels) {
    labels.push_back({{"label", l.label}, {"cases", l.cases}, {"mean_dice", l.meanDice},
                      {"mean_hd95_mm", distanceJson(l.meanHd95)}, {"infinite_hd95", l.infiniteHd95}});
    foreground += l.meanDice;
  }
  if (!s.labels.empty()) s.meanDice = foreground / static_cast<double>(s.labels.size());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.line = {{"dataset", plan.dataset}, {"cases", toString(plan.cases)}, {"predicted", scored.size()},
            {"failed", failures},      {"labels", labels},              {"seconds", s.seconds},
            {"out", plan.outDir}};
  if (runFields.is_object()) s.line.update(runFields);  // null: none
  if (!s.labels.empty()) s.line["mean_dice"] = s.meanDice;
  nlohmann::json file = s.line;
  file["metric_per_case"] = perCase;
  s.summaryPath = (fs::path(plan.outDir) / "summary.json").string();
  io::atomicWrite(s.summaryPath, [&](const std::string& temp) {
    std::ofstream out(temp);
    out << file.dump(2) << "\n";
    if (!out.flush()) throw IoError(s.summaryPath, "could not be written");
  });
  s.line["summary"] = s.summaryPath;
  return s;
}

namespace {
constexpr std::size_t kMaxSummaryBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxCases = 100000;
constexpr std::int64_t kMaxVoxels = std::int64_t{1} << 50;

// Bytes per device: at most 64 devices, names of 1 to 64 characters, whole numbers below 2^56.
// Named "... memory measured cpu", as summary.json's refusals have always been worded.
DevicePeaks peaksOf(const std::optional<JsonField>& field, const std::string& path) {
  DevicePeaks out;
  if (!field) return out;
  const JsonField peaks(field->json(), path);
  for (const auto& [device, bytes] : peaks.entries(64, "at most 64 devices and their bytes")) {
    if (device.empty() || device.size() > 64) peaks.refuse("a device name of 1 to 64 characters");
    out[device] = JsonField(bytes.json(), path + " " + device).wholeIn(0, std::int64_t{1} << 56);
  }
  return out;
}

double distanceOf(const JsonField& f) {
  if (f.kind() == JsonKind::Text && f.as<std::string>() == "inf") return std::numeric_limits<double>::infinity();
  return f.as<double>();
}

// The case's prediction in the summary's folder: its id must name one file there.
std::string predictionOf(const JsonField& id, const std::string& outDir) {
  const auto name = id.as<std::string>();
  if (!plainFileName(name)) id.refuse("case id '" + name + "' is no plain file name");
  return (fs::path(outDir) / (name + ".nii.gz")).string();
}

metrics::LabelMetrics labelMetricsOf(const JsonField& field) {
  auto m = field.fields(UnknownKeys::Ignore);
  metrics::LabelMetrics lm;
  lm.label = static_cast<int>(m.require("label").wholeIn(1, 65535));
  lm.dice = m.get<double>("dice");
  lm.hd95 = distanceOf(m.require("hd95_mm"));
  lm.predicted = m.require("predicted").wholeIn(0, kMaxVoxels);
  lm.truth = m.require("truth").wholeIn(0, kMaxVoxels);
  lm.falsePositive = m.require("false_positive").wholeIn(0, kMaxVoxels);
  lm.falseNegative = m.require("false_negative").wholeIn(0, kMaxVoxels);
  return lm;
}

CaseResult scoredCaseOf(const JsonField& field, const std::string& outDir) {
  auto c = field.fields(UnknownKeys::Ignore);
  CaseResult r;
  const JsonField id = c.require("case");
  r.files.id = id.as<std::string>();
  r.files.image = c.get<std::string>("image");
  r.files.label = c.get<std::string>("label");
  r.files.prediction = predictionOf(id, outDir);
  r.seconds = c.get<double>("seconds");
  r.meanDice = c.get<double>("mean_dice");
  if (const auto memory = c.take("memory")) {
    const JsonField m(memory->json(), field.path() + " memory");
    auto both = m.fields(UnknownKeys::Ignore, "measured and planned bytes per device");
    r.peakBytes = peaksOf(both.take("measured"), m.path() + " measured");
    r.plannedBytes = peaksOf(both.take("planned"), m.path() + " planned");
  }
  for (const auto& m : c.require("metrics").elements()) r.metrics.push_back(labelMetricsOf(m));
  return r;
}

CaseResult failedCaseOf(const JsonField& field, const std::string& outDir) {
  auto c = field.fields(UnknownKeys::Ignore);
  CaseResult r;
  const JsonField id = c.require("case");
  r.files.id = id.as<std::string>();
  r.files.prediction = predictionOf(id, outDir);
  r.error = c.get<std::string>("error");
  if (r.error.empty()) r.error = "failed";
  return r;
}

SavedEvaluation savedEvaluationOf(const nlohmann::json& j, const std::string& summaryPath) {
  // summary.json also holds the run's fields, the per-label summary and more: read, not refused.
  JsonReader top(j, "", UnknownKeys::Ignore);
  SavedEvaluation out;
  auto& plan = out.plan;
  plan.dataset = top.get<std::string>("dataset");
  plan.cases = top.require("cases").parsed(caseSetFromString);
  const std::string folder = fs::path(summaryPath).parent_path().string();
  plan.outDir = folder.empty() ? "." : folder;
  const auto perCase = top.require("metric_per_case").elements();
  const auto failedField = top.take("failed");
  const auto failed = failedField ? failedField->elements() : std::vector<JsonField>{};
  if (perCase.size() + failed.size() > kMaxCases) throw FormatError(summaryPath, "more than 100000 cases");
  std::vector<std::vector<metrics::LabelMetrics>> scored;
  for (const auto& c : perCase) {
    out.summary.cases.push_back(scoredCaseOf(c, plan.outDir));
    scored.push_back(out.summary.cases.back().metrics);
    plan.files.push_back(out.summary.cases.back().files);
  }
  for (const auto& f : failed) {
    out.summary.cases.push_back(failedCaseOf(f, plan.outDir));
    plan.files.push_back(out.summary.cases.back().files);
    ++out.summary.failed;
  }
  // The per-label summary again from the cases (the one rule, metrics::summarize).
  out.summary.labels = metrics::summarize(scored);
  double sum = 0;
  for (const auto& l : out.summary.labels) sum += l.meanDice;
  if (!out.summary.labels.empty()) out.summary.meanDice = sum / static_cast<double>(out.summary.labels.size());
  out.summary.seconds = top.get<double>("seconds", 0.0);
  out.summary.summaryPath = summaryPath;
  out.summary.line = j;
  out.summary.line.erase("metric_per_case");
  return out;
}
} // namespace

SavedEvaluation readEvaluation(const std::string& summaryPath) {
  const std::string problem = io::regularFileProblem(summaryPath);
  if (problem == "does not exist") throw IoError(summaryPath, "no such file");
  if (!problem.empty()) throw IoError(summaryPath, problem);
  const nlohmann::json j = readJsonFile(summaryPath, JsonLimits{kMaxSummaryBytes});
  try {
    return savedEvaluationOf(j, summaryPath);
  } catch (const InvalidArgument& e) {  // a JsonFieldError, named by its path
    throw FormatError(summaryPath, e.what());
  }
}

} // namespace splitseg::evaluate
