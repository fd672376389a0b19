#pragma once
// The run description: everything that defines a training or inference run, as one value.
// Front ends fill it once (CLI flags, the GUI document); the planner, trainer, inferer, session
// files and checkpoints all take or store this same value, as JSON. No Qt, no LibTorch.
#include "core/planner/HostCpu.h"
#include "core/planner/MemoryPlanner.h"
#include "core/placement/Placement.h"
#include "core/placement/Precision.h"
#include "core/placement/ShardLayout.h"
#include "core/volume/Preprocessing.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace splitseg::run {

constexpr int kRunSpecVersion = 1;

// Where training samples come from.
enum class DataKind { None, Synthetic, Volume, Pairs, Dataset };
std::string toString(DataKind k);
DataKind dataKindFromString(const std::string& s);  // throws InvalidArgument

struct DataSpec {
  DataKind kind = DataKind::Synthetic;  // synthetic phantoms of the patch size
  std::string image;                    // Volume / Pairs: image file
  std::string label;                    // Pairs (and Volume when a ground truth is open)
  std::string dataset;                  // Dataset: MSD or nnU-Net raw folder
  double validationFraction = 0.2;      // share of dataset cases held out
  bool operator==(const DataSpec& o) const;
};

// The learning rate over a run: constant, or decayed from the run's rate to 0 over its steps,
// "poly" as nnU-Net's (1 - t/T)^0.9 or "cosine" 0.5 (1 + cos(pi t/T)) (t: steps done before
// the step, T: the run's total).
enum class LrSchedule { Constant, Poly, Cosine };
std::string toString(LrSchedule s);
LrSchedule lrScheduleFromString(const std::string& s);  // throws InvalidArgument

// Test-time mirroring axes (x, y, z) as text: "xyz", "z", "" for none; parsing takes the letters
// in any order, each once, and "none". Throws InvalidArgument for anything else.
std::string mirrorToString(const std::array<bool, 3>& axes);
std::array<bool, 3> mirrorFromString(const std::string& s);
// Forward passes per window (or per whole volume) under `mirror`: 2^(axes mirrored).
int mirrorPasses(const std::array<bool, 3>& mirror);

// One field that does not make sense, named as in the JSON ("schedule.steps").
struct Problem {
  std::string field;
  std::string message;
  std::string text() const { return field + ": " + message; }
};

// What a run preprocesses with unless told otherwise: canonical orientation, the source spacing
// and the CT soft-tissue window (W400 L40) — the demo and most users' data are CT.
Preprocessing defaultPreprocessing();

struct RunSpec {
  // Network: an architecture of the registry and its options JSON.
  std::string architecture = "unet3d";
  nlohmann::json networkOptions = nlohmann::json::object();
  // Stage -> device; stages not listed run on the first device of the run.
  std::map<std::string, std::string> placement;
  placement::StagePrecisions precision;
  std::set<std::string> recompute;                 // stages with activation checkpointing
  // Host offload: recomputed stages on GPUs keep their saved inputs in pinned host memory between
  // forward and backward (fetched back for their backward, the next stage's prefetched). Frees
  // device memory for larger volumes at the cost of two host copies of those inputs per step.
  bool offload = false;
  // Layout of the fp32 CPU stages' weights while training: auto is channels-last on CPUs without
  // AVX-512 (faster there, measured), NCDHW elsewhere (planner::usesChannelsLast). Runs over
  // ranks and sharded stages keep NCDHW.
  planner::CpuLayout cpuLayout = planner::CpuLayout::Auto;
  // Sharded stages ("dec0": "cuda:0+cuda:1"): the axis the volume is cut along, and optional slab
  // sizes (planes at full resolution) per placement entry; others are cut evenly.
  placement::ShardAxis shardAxis = placement::ShardAxis::Depth;
  std::map<std::string, std::vector<std::int64_t>> shardSlabs;
  std::array<std::int64_t, 3> patch{64, 64, 64};   // x, y, z
  int batch = 1;
  // Ranks: each batch split into this many micro-batches that flow through the ranks one after
  // another (GPipe); with every stage sharded over the ranks (ranks::SpatialTrainer) they run one
  // after another, each through its backward first (activations of one at a time). The loss is a
  // mean over samples, so any split gives the batch's gradients.
  int microBatches = 1;
  // Seconds a rank waits for another before it gives up (a rank that died, hangs or cannot be
  // reached); every rank then stops with a line naming the rank.
  int rankTimeoutSeconds = 120;
  // Record where each device's time goes in every step (StepMetrics::timeline): the workstation's
  // device timeline, `train --timeline`. On CUDA each span ends with a synchronize.
  bool timeline = false;
  // Schedule.
  std::int64_t steps = 100;
  int epochs = 0;                                  // > 0: epochs * stepsPerEpoch steps
  std::int64_t stepsPerEpoch = 50;
  std::int64_t validateEvery = 0;                  // steps; 0: never
  std::int64_t checkpointEvery = 0;                // steps; 0: only at the end
  double learningRate = 1e-3;
  LrSchedule lrSchedule = LrSchedule::Constant;
  std::uint64_t seed = 0;
  std::int64_t cpuBudgetBytes = 0;                 // 0: none
  Preprocessing preprocessing = defaultPreprocessing();  // CT soft-tissue window, source spacing
  DataSpec data;
  std::string checkpoint;                          // written by training, read by inference
  // Inference: sliding window (0: whole volume) and overlap.
  std::array<std::int64_t, 3> window{0, 0, 0};    // x, y, z
  double overlap = 0.5;
  // Test-time mirroring (engine::InferOptions::mirror) along x, y, z; each axis doubles the passes.
  std::array<bool, 3> mirror{false, false, false};
  // After inference, only each label's largest 26-connected region is kept (nnU-Net's "remove all
  // but the largest component"; postprocess::keepLargestComponents), on the image's own grid.
  bool keepLargest = false;

  std::int64_t totalSteps() const { return epochs > 0 ? epochs * stepsPerEpoch : steps; }
  // The rate the optimizer takes for the step after `stepsDone` steps (lrSchedule over totalSteps;
  // a resumed run continues the curve where it stopped).
  double learningRateAt(std::int64_t stepsDone) const;

  // The placement over the network's stages (in network order); stages not listed go to
  // defaultDevice. Throws InvalidArgument for a stage the network does not have.
  placement::Placement resolvePlacement(const std::vector<std::string>& stages, const std::string& defaultDevice) const;
  void setPlacement(const placement::Placement& p);

  // The planner's request for this run (size D,H,W from the patch) on `devices`.
  planner::PlanRequest planRequest(const std::vector<std::string>& stages,
                                     const std::vector<planner::DeviceSpec>& devices) const;
  // The planner's request for this run's inference of an image of `volumeZyx` voxels (D, H, W, as
  // the network sees it) in its window and overlap, `windowsPerPass` windows at a time. CPU
  // weights channels-last, as engine::InferOptions has them by default.
  planner::PlanRequest inferencePlanRequest(const std::vector<std::string>& stages,
                                              const std::vector<planner::DeviceSpec>& devices,
                                              const std::array<std::int64_t, 3>& volumeZyx, int windowsPerPass) const;

  // Every problem, each with its field. `devices`: those that can run (empty: not checked);
  // `stages`: the network's (empty: stage names not checked).
  std::vector<Problem> validate(const std::vector<std::string>& devices = {},
                                const std::vector<std::string>& stages = {}) const;
  // Throws InvalidArgument with the first problem ("run.batch: must be at least 1").
  void check(const std::vector<std::string>& devices = {}, const std::vector<std::string>& stages = {}) const;

  // {"splitseg_run": 1, "network": {...}, ...}; keys in a fixed order, so equal runs give
  // equal text.
  nlohmann::ordered_json toJson() const;
  // Strict: wrong types, unknown keys (named) and a newer version throw InvalidArgument
  // naming the field. Missing keys keep their defaults.
  static RunSpec fromJson(const nlohmann::json& j);
  static RunSpec fromText(const std::string& text);

  bool operator==(const RunSpec& o) const { return toJson() == o.toJson(); }
  bool operator!=(const RunSpec& o) const { return !(*this == o); }
};

// "64" -> {64,64,64}; "96,96,64" -> {96,96,64} (x,y,z). Throws InvalidArgument.
std::array<std::int64_t, 3> parseSize(const std::string& text);
// "all" -> every stage; "enc0,dec0" -> those (each must be a stage when stages is not empty).
std::set<std::string> parseStageList(const std::string& text, const std::vector<std::string>& stages);

} // namespace splitseg::run
