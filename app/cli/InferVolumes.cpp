// Predictions of image files and of a dataset's cases, scored against their ground truth
// (`splitseg-cli infer --image ... --label`, `infer --dataset`).
#include "app/cli/InferSupport.h"

#include "core/base/Error.h"
#include "core/dataset/Dataset.h"
#include "core/dataset/DatasetSource.h"
#include "core/dist/RankPeaks.h"
#include "core/io/AtomicWrite.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/metrics/SegmentationMetrics.h"
#include "core/postprocess/LargestComponent.h"
#include "core/volume/Preprocessing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

namespace splitseg::cli {

namespace {
nlohmann::json metricsJson(const std::vector<metrics::LabelMetrics>& ms) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& m : ms)
    j.push_back({{"label", m.label},
                 {"dice", m.dice},
                 {"hd95_mm", std::isfinite(m.hd95) ? nlohmann::json(m.hd95) : nlohmann::json("inf")},
                 {"predicted", m.predicted},
                 {"truth", m.truth},
                 {"false_positive", m.falsePositive},
                 {"false_negative", m.falseNegative}});
  return j;
}

// The dataset's cases to predict: all, or one side of the split training made (the same
// fraction and seed DatasetSource splits with), in the dataset's order.
std::vector<std::size_t> chosenCases(const dataset::Dataset& ds, const std::string& which, double validationFraction) {
  std::vector<std::size_t> idx;
  if (which == "all") {
    for (std::size_t i = 0; i < ds.cases.size(); ++i) idx.push_back(i);
  } else {
    const auto split = dataset::splitCases(ds.cases.size(), validationFraction, dataset::DatasetSourceOptions{}.splitSeed);
    idx = which == "validation" ? split.validation : split.train;
  }
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Refuses what would write outside `outDir` or over the dataset's own files, before any work.
std::vector<std::string> outputPaths(const dataset::Dataset& ds, const std::vector<std::size_t>& idx, const std::string& outDir) {
  namespace fs = std::filesystem;
  std::set<std::string> inputs, ids;
  for (const auto& c : ds.cases) {
    for (const auto& im : c.images) inputs.insert(fs::weakly_canonical(im).string());
    inputs.insert(fs::weakly_canonical(c.label).string());
  }
  std::vector<std::string> out;
  for (const auto i : idx) {
    const std::string& id = ds.cases[i].id;
    if (id.empty() || id == "." || id == ".." || id.find_first_of("/\\") != std::string::npos)
      throw FormatError(ds.root, "case id '" + id + "' cannot name a file in --out");
    if (!ids.insert(id).second)
      throw FormatError(ds.root, "two cases are named '" + id + "': their predictions would overwrite each other");
    const fs::path p = fs::path(outDir) / (id + ".nii.gz");
    if (inputs.count(fs::weakly_canonical(p).string()))
      throw InvalidArgument("--out " + outDir + " would overwrite the dataset's own " + p.string() + "; choose another folder");
    out.push_back(p.string());
  }
  return out;
}

} // namespace

// A real volume: preprocess exactly as the checkpoint's training did, predict, and write the
// labels back in the source geometry (so it overlays in Slicer / ITK-SNAP). With a ground truth
// (`labelPath`), Dice and HD95 per label of what was written; `scores` gets them.
// Returns the line to print, with the planner's memory figures beside the measured ones (as
// timedPredict measures them: the preprocessing's own copies are no LibTorch allocations).
nlohmann::json inferVolume(const InferArgs& a, run::RunSpec spec, engine::Inferer& inferer, model::StagedNetwork& net,
                           const std::string& placement, const dist::LocalStages& local, const std::string& imagePath,
                           const std::string& labelPath, const std::string& outPath,
                           std::vector<metrics::LabelMetrics>* scores) {
  const Volume source = io::readVolume(imagePath);
  // The ground truth is checked before the prediction: a label of another grid fails at once.
  std::optional<Volume> truth;
  if (!labelPath.empty()) {
    truth = io::readVolume(labelPath);
    if (!truth->geometry().sameGrid(source.geometry()))
      throw InvalidArgument("label " + labelPath + " is not on the grid of " + imagePath + " (size, spacing, origin or direction differ)");
  }
  const auto grid = spec.preprocessing.networkGrid(source.geometry()).size;  // x, y, z
  if (a.window == "largest") setLargestWindow(spec, net, {grid[2], grid[1], grid[0]});
  const engine::InferOptions o = inferOptions(spec);
  const nlohmann::json planned = plannedPeaks(spec, net, {grid[2], grid[1], grid[0]});
  CliProgress progress(a.progress);
  const auto t0 = std::chrono::steady_clock::now();
  dist::DevicePeaks peaks;
  Volume labels;
  {
    dist::PeakMeter meter(local.namedRank, local.modules);
    meter.holdOnCpu(engine::predictLabelsImageBytes(source, spec.preprocessing));
    labels = engine::predictLabels(inferer, source, spec.preprocessing, o, &progress);
    peaks = meter.peaks();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json kept = nlohmann::json::array();
  if (spec.keepLargest)
    for (const auto& c : postprocess::keepLargestComponents(labels)) {
      kept.push_back({{"label", c.label}, {"components", c.components}, {"kept", c.kept}, {"removed", c.removed}});
      if (c.removed > 0)
        std::cerr << "note: --keep-largest: label " << c.label << ": " << c.removed << " voxel(s) in " << c.components - 1
                  << " smaller region(s) set to background, " << c.kept << " kept\n";
    }
  io::writeSegmentation(labels, source.geometry(), outPath);
  nlohmann::json out{{"seconds", seconds},   {"out", outPath},
                     {"placement", placement}, {"window", spec.window},
                     {"mirror", run::mirrorToString(spec.mirror)}};
  if (spec.keepLargest) out["keep_largest"] = kept;
  if (truth) {
    // As written: on the source's grid, what a viewer shows against the ground truth.
    labels.geometry() = source.geometry();
    const auto ms = metrics::SegmentationMetrics::compute(labels, *truth);
    out["label"] = labelPath;
    out["metrics"] = metricsJson(ms);
    double mean = 0;
    for (const auto& m : ms) mean += m.dice;
    out["mean_dice"] = ms.empty() ? 1.0 : mean / static_cast<double>(ms.size());
    if (scores) *scores = ms;
  }
  out["memory"] = {{"planned", planned}, {"measured", peaks}};
  return out;
}

// infer --dataset: every chosen case predicted into `outDir` as <case>.nii.gz, one JSON line
// each (a case that cannot be read or does not fit is reported and the others go on), its
// ground truth scored, and summary.json beside them (per case and per label, as nnU-Net's
// evaluation). Returns the summary line; `failed` gets the cases that did not finish.
nlohmann::json inferDataset(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                            const std::string& placement, const dist::LocalStages& local, int& failed) {
  namespace fs = std::filesystem;
  const dataset::Dataset ds = dataset::openDataset(spec.data.dataset);
  if (ds.channelCount() != 1)
    throw InvalidArgument(ds.name + " has " + std::to_string(ds.channelCount()) +
                          " input channels; infer --dataset predicts one-channel images");
  const std::string which = a.cases.empty() ? "all" : a.cases;
  const auto idx = chosenCases(ds, which, spec.data.validationFraction);
  if (idx.empty()) throw InvalidArgument("--cases " + which + ": the split leaves no case of " + ds.name + " there");
  if (fs::exists(a.out) && !fs::is_directory(a.out)) throw InvalidArgument("--out " + a.out + " is a file; give a folder");
  const auto outs = outputPaths(ds, idx, a.out);
  fs::create_directories(a.out);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<metrics::LabelMetrics>> scored;
  nlohmann::json perCase = nlohmann::json::array(), failures = nlohmann::json::array();
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const auto& c = ds.cases[idx[k]];
    std::cerr << "case " << k + 1 << "/" << idx.size() << ": " << c.id << "\n";
    std::string error;
    try {
      std::vector<metrics::LabelMetrics> ms;
      auto line = inferVolume(a, spec, inferer, net, placement, local, c.images[0], c.label, outs[k], &ms);
      line["case"] = c.id;
      std::cout << line.dump() << std::endl;
      scored.push_back(ms);
      perCase.push_back({{"case", c.id}, {"image", c.images[0]}, {"label", c.label}, {"prediction", outs[k]},
                         {"seconds", line["seconds"]}, {"metrics", line["metrics"]}, {"mean_dice", line["mean_dice"]}});
    } catch (const IoError& e) {  // unreadable or corrupt input (FormatError too)
      error = e.what();
    } catch (const InvalidArgument& e) {  // a label of another grid
      error = e.what();
    } catch (const OutOfMemoryError& e) {  // this case's volume is too large for the devices
      error = e.what();
    }
    if (!error.empty()) {
      std::cerr << "error: case " << c.id << ": " << error << "\n";
      failures.push_back({{"case", c.id}, {"error", error}});
      std::cout << failures.back().dump() << std::endl;
    }
  }
  nlohmann::json labels = nlohmann::json::array();
  double foreground = 0;
  const auto summary = metrics::summarize(scored);
  for (const auto& l : summary) {
    labels.push_back({{"label", l.label}, {"cases", l.cases}, {"mean_dice", l.meanDice},
                      {"mean_hd95_mm", std::isfinite(l.meanHd95) ? nlohmann::json(l.meanHd95) : nlohmann::json("inf")},
                      {"infinite_hd95", l.infiniteHd95}});
    foreground += l.meanDice;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json out{{"dataset", ds.name}, {"cases", which},      {"predicted", scored.size()},
                     {"failed", failures}, {"labels", labels},    {"seconds", seconds},
                     {"out", a.out},       {"placement", placement}, {"window", spec.window},
                     {"mirror", run::mirrorToString(spec.mirror)}};
  if (!summary.empty()) out["mean_dice"] = foreground / static_cast<double>(summary.size());
  nlohmann::json file = out;
  file["metric_per_case"] = perCase;
  const std::string path = (fs::path(a.out) / "summary.json").string();
  io::atomicWrite(path, [&](const std::string& temp) {
    std::ofstream f(temp);
    f << file.dump(2) << "\n";
    if (!f.flush()) throw IoError(path, "could not be written");
  });
  out["summary"] = path;
  failed = static_cast<int>(failures.size());
  return out;
}

} // namespace splitseg::cli
