// Predictions of image files and of a dataset's cases, scored against their ground truth
// (`splitseg-cli infer --image ... --label`, `infer --dataset`): core/evaluate reads, writes and
// scores; this file adds the memory figures and prints the JSON lines.
#include "app/cli/InferSupport.h"

#include "core/base/Error.h"
#include "core/dataset/Dataset.h"
#include "core/ranks/RankPeaks.h"
#include "core/evaluate/DatasetEvaluation.h"
#include "core/volume/Preprocessing.h"

#include <iostream>

namespace splitseg::cli {

namespace {
// The run's prediction of one image as core/evaluate asks for it; `line` gets the planner's
// memory figures beside the measured ones (as timedPredict measures them: the preprocessing's own
// copies are no LibTorch allocations) and the window used.
evaluate::Predict predictor(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                            const ranks::LocalStages& local, nlohmann::json& line) {
  return [&a, &spec, &inferer, &net, &local, &line](const Volume& source) {
    run::RunSpec s = spec;
    const auto grid = s.preprocessing.networkGrid(source.geometry()).size;  // x, y, z
    if (a.window == "largest") setLargestWindow(s, net, {grid[2], grid[1], grid[0]});
    const engine::InferOptions o = inferOptions(s);
    const nlohmann::json planned = plannedPeaks(s, net, {grid[2], grid[1], grid[0]});
    CliProgress progress(a.progress);
    ranks::DevicePeaks measured;
    Volume labels = ranks::predictLabelsMeasured(inferer, local, source, s.preprocessing, o, s.cpuBudgetBytes, measured, &progress);
    line["window"] = s.window;
    // Over ranks, every other rank's peak over this prediction alone (its meter then restarts).
    for (const auto& [device, bytes] : inferer.restartOtherPeaks()) measured[device] = bytes;
    line["memory"] = {{"planned", planned}, {"measured", measured}};
    evaluate::DevicePeaks plannedBytes;  // the numbers only (a plan that failed says why under "error")
    for (const auto& [device, bytes] : planned.items())
      if (bytes.is_number_integer()) plannedBytes[device] = bytes.get<std::int64_t>();
    return evaluate::Predicted(std::move(labels), measured, plannedBytes);
  };
}

// The JSON line of one predicted case.
nlohmann::json caseLine(const run::RunSpec& spec, const std::string& placement, const evaluate::CaseResult& r, nlohmann::json line) {
  line["seconds"] = r.seconds;
  line["out"] = r.files.prediction;
  line["placement"] = placement;
  line["mirror"] = run::mirrorToString(spec.mirror);
  if (spec.keepLargest) {
    line["keep_largest"] = evaluate::keptJson(r.kept);
    for (const auto& c : r.kept)
      if (c.removed > 0)
        std::cerr << "note: --keep-largest: label " << c.label << ": " << c.removed << " voxel(s) in " << c.components - 1
                  << " smaller region(s) set to background, " << c.kept << " kept\n";
  }
  if (!r.files.label.empty()) {
    line["label"] = r.files.label;
    line["metrics"] = evaluate::metricsJson(r.metrics);
    line["mean_dice"] = r.meanDice;
  }
  return line;
}
} // namespace

nlohmann::json inferVolume(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                           const std::string& placement, const ranks::LocalStages& local, const std::string& imagePath,
                           const std::string& labelPath, const std::string& outPath) {
  nlohmann::json line;
  const auto r = evaluate::predictCase({"", imagePath, labelPath, outPath}, predictor(a, spec, inferer, net, local, line), spec.keepLargest);
  return caseLine(spec, placement, r, line);
}

nlohmann::json inferDataset(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                            const std::string& placement, const ranks::LocalStages& local, int& failed) {
  const dataset::Dataset ds = dataset::openDataset(spec.data.dataset);
  const auto plan = evaluate::planEvaluation(ds, evaluate::caseSetFromString(a.cases.empty() ? "all" : a.cases),
                                             spec.data.validationFraction, a.out);
  // One JSON line per case as it finishes, its failure included.
  struct Lines final : evaluate::EvaluationObserver {
    const run::RunSpec& spec;
    const std::string& placement;
    nlohmann::json& line;
    std::size_t count;
    Lines(const run::RunSpec& s, const std::string& p, nlohmann::json& l, std::size_t n) : spec(s), placement(p), line(l), count(n) {}
    void caseStarted(std::size_t k, const evaluate::CaseFiles& f) override {
      std::cerr << "case " << k + 1 << "/" << count << ": " << f.id << "\n";
      line = nlohmann::json::object();
    }
    void caseFinished(std::size_t, const evaluate::CaseResult& r) override {
      if (!r.ok()) {
        std::cerr << "error: case " << r.files.id << ": " << r.error << "\n";
        std::cout << nlohmann::json{{"case", r.files.id}, {"error", r.error}}.dump() << std::endl;
        return;
      }
      auto out = caseLine(spec, placement, r, line);
      out["case"] = r.files.id;
      std::cout << out.dump() << std::endl;
    }
  };
  nlohmann::json line;
  Lines lines(spec, placement, line, plan.files.size());
  const nlohmann::json runFields{{"placement", placement}, {"window", spec.window}, {"mirror", run::mirrorToString(spec.mirror)}};
  auto s = evaluate::evaluateDataset(plan, predictor(a, spec, inferer, net, local, line), spec.keepLargest, runFields, &lines);
  failed = s.failed;
  return s.line;
}

} // namespace splitseg::cli
