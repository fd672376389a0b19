#include "core/evaluate/DatasetEvaluation.h"
#include "core/base/JsonText.h"

#include "core/base/Error.h"
#include "core/base/JsonNumbers.h"
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

// A whole number in lo..hi: a float (1e300) is refused rather than cast, which would be undefined.
std::int64_t integerOf(const nlohmann::json& v, std::int64_t lo, std::int64_t hi, const std::string& summaryPath,
                       const std::string& field) {
  if (const auto n = wholeNumberIn(v, lo, hi)) return *n;
  throw FormatError(summaryPath, field + ": " + v.dump().substr(0, 40) + " is not a whole number in " + std::to_string(lo) +
                                     ".." + std::to_string(hi));
}

// Bytes per device: at most 64 devices, names of 1 to 64 characters, whole numbers below 2^56.
DevicePeaks peaksOf(const nlohmann::json& j, const std::string& summaryPath, const std::string& field) {
  if (!j.is_object() || j.size() > 64) throw FormatError(summaryPath, field + ": expected at most 64 devices and their bytes");
  DevicePeaks out;
  for (const auto& [device, bytes] : j.items()) {
    if (device.empty() || device.size() > 64) throw FormatError(summaryPath, field + ": a device name of 1 to 64 characters");
    out[device] = integerOf(bytes, 0, std::int64_t{1} << 56, summaryPath, field + " " + device);
  }
  return out;
}

double distanceOf(const nlohmann::json& v) {
  if (v.is_string() && v.get<std::string>() == "inf") return std::numeric_limits<double>::infinity();
  return v.get<double>();
}
} // namespace

SavedEvaluation readEvaluation(const std::string& summaryPath) {
  const std::string problem = io::regularFileProblem(summaryPath);
  if (problem == "does not exist") throw IoError(summaryPath, "no such file");
  if (!problem.empty()) throw IoError(summaryPath, problem);
  const nlohmann::json j = readJsonFile(summaryPath, JsonLimits{kMaxSummaryBytes});
  SavedEvaluation out;
  std::string field = "the top level";
  try {
    if (!j.is_object()) throw FormatError(summaryPath, "not an evaluation summary (expected an object)");
    const std::string folder = fs::path(summaryPath).parent_path().string();
    auto& plan = out.plan;
    field = "dataset";
    plan.dataset = j.at("dataset").get<std::string>();
    field = "cases";
    plan.cases = caseSetFromString(j.at("cases").get<std::string>());
    plan.outDir = folder.empty() ? "." : folder;
    const auto fileOf = [&](const std::string& id) {
      if (!plainFileName(id)) throw FormatError(summaryPath, field + ": case id '" + id + "' is no plain file name");
      return (fs::path(plan.outDir) / (id + ".nii.gz")).string();
    };
    field = "metric_per_case";
    const auto& perCase = j.at("metric_per_case");
    field = "failed";
    const auto& failed = j.value("failed", nlohmann::json::array());
    if (!perCase.is_array() || !failed.is_array()) throw FormatError(summaryPath, "metric_per_case and failed must be lists");
    if (perCase.size() + failed.size() > kMaxCases) throw FormatError(summaryPath, "more than 100000 cases");
    std::vector<std::vector<metrics::LabelMetrics>> scored;
    for (std::size_t k = 0; k < perCase.size(); ++k) {
      field = "metric_per_case[" + std::to_string(k) + "]";
      const auto& c = perCase[k];
      CaseResult r;
      r.files.id = c.at("case").get<std::string>();
      r.files.image = c.at("image").get<std::string>();
      r.files.label = c.at("label").get<std::string>();
      r.files.prediction = fileOf(r.files.id);
      r.seconds = c.at("seconds").get<double>();
      r.meanDice = c.at("mean_dice").get<double>();
      if (const auto memory = c.find("memory"); memory != c.end()) {
        if (!memory->is_object()) throw FormatError(summaryPath, field + " memory: expected measured and planned bytes per device");
        r.peakBytes = peaksOf(memory->value("measured", nlohmann::json::object()), summaryPath, field + " memory measured");
        r.plannedBytes = peaksOf(memory->value("planned", nlohmann::json::object()), summaryPath, field + " memory planned");
      }
      for (const auto& m : c.at("metrics")) {
        metrics::LabelMetrics lm;
        constexpr std::int64_t kVoxels = std::int64_t{1} << 50;
        lm.label = static_cast<int>(integerOf(m.at("label"), 1, 65535, summaryPath, field + " label"));
        lm.dice = m.at("dice").get<double>();
        lm.hd95 = distanceOf(m.at("hd95_mm"));
        lm.predicted = integerOf(m.at("predicted"), 0, kVoxels, summaryPath, field + " predicted");
        lm.truth = integerOf(m.at("truth"), 0, kVoxels, summaryPath, field + " truth");
        lm.falsePositive = integerOf(m.at("false_positive"), 0, kVoxels, summaryPath, field + " false_positive");
        lm.falseNegative = integerOf(m.at("false_negative"), 0, kVoxels, summaryPath, field + " false_negative");
        r.metrics.push_back(lm);
      }
      scored.push_back(r.metrics);
      plan.files.push_back(r.files);
      out.summary.cases.push_back(r);
    }
    for (std::size_t k = 0; k < failed.size(); ++k) {
      field = "failed[" + std::to_string(k) + "]";
      CaseResult r;
      r.files.id = failed[k].at("case").get<std::string>();
      r.files.prediction = fileOf(r.files.id);
      r.error = failed[k].at("error").get<std::string>();
      if (r.error.empty()) r.error = "failed";
      plan.files.push_back(r.files);
      out.summary.cases.push_back(r);
      ++out.summary.failed;
    }
    // The per-label summary again from the cases (the one rule, metrics::summarize).
    out.summary.labels = metrics::summarize(scored);
    double sum = 0;
    for (const auto& l : out.summary.labels) sum += l.meanDice;
    if (!out.summary.labels.empty()) out.summary.meanDice = sum / static_cast<double>(out.summary.labels.size());
    field = "seconds";
    out.summary.seconds = j.value("seconds", 0.0);
    out.summary.summaryPath = summaryPath;
    out.summary.line = j;
    out.summary.line.erase("metric_per_case");
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(summaryPath, field + ": " + e.what());
  } catch (const InvalidArgument& e) {
    throw FormatError(summaryPath, field + ": " + e.what());
  }
  return out;
}

} // namespace splitseg::evaluate
