#pragma once
// What the parts of `splitseg-cli infer` share: its arguments, the run's inference options, the
// planner's peaks for a prediction and the largest window; with ITK, predictions of image files
// and of a dataset's cases (InferVolumes.cpp).
#include "app/cli/RunOptions.h"
#include "core/ranks/RankPeaks.h"
#include "core/engine/Inferer.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::cli {

struct InferArgs {
  RunOptions run;
  std::string out;
  std::string checkpoint;
  std::string window;
  double overlap = 0.5;
  CLI::Option* overlapGiven = nullptr;
  std::string mirror;  // empty: the run's
  bool keepLargest = false;
  int batch = 1;
  CLI::Option* batchGiven = nullptr;
  int microBatches = 1;
  CLI::Option* microGiven = nullptr;
  std::string progress = "bar";
  std::uint64_t seed = 1;
  std::string probabilities;
  std::string cases;  // --dataset: all | validation | training
};

// The run's window, overlap and windows per pass (an inference run's batch).
engine::InferOptions inferOptions(const run::RunSpec& spec);
// The planner's tensor peak per device for a prediction of `volumeZyx` (allowances excluded); a
// device it does not fit gets a note on stderr.
nlohmann::json plannedPeaks(const run::RunSpec& spec, model::StagedNetwork& net, const std::array<std::int64_t, 3>& volumeZyx);
// --window largest: the largest cubic window the planner fits on the run's devices.
void setLargestWindow(run::RunSpec& spec, model::StagedNetwork& net, const std::array<std::int64_t, 3>& volumeZyx);
// --dataset: throws when `failed` > 0 (after the summary line is out).
void failIfCasesFailed(int failed);

#ifdef SPLITSEG_WITH_ITK
// One image predicted into `outPath` (in the image's geometry); with `labelPath`, Dice and HD95
// per label of what was written. Returns the JSON line.
nlohmann::json inferVolume(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                           const std::string& placement, const ranks::LocalStages& local, const std::string& imagePath,
                           const std::string& labelPath, const std::string& outPath);
// The dataset's chosen cases (a.cases) predicted into the folder a.out and scored; summary.json
// beside them. Returns the summary line; `failed`: the cases that could not be predicted.
nlohmann::json inferDataset(const InferArgs& a, const run::RunSpec& spec, engine::Inferer& inferer, model::StagedNetwork& net,
                            const std::string& placement, const ranks::LocalStages& local, int& failed);
#endif

} // namespace splitseg::cli
