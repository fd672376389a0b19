#pragma once
// The run launcher, the logic tier under the CLI and the workstation: a front end fills a run
// description and calls train or infer; the launcher resolves the execution mode once
// (ranks::executionModeOf) and runs it in this process or as rank 0 over the ranks. The other
// ranks run serveAsWorker. Progress, metrics and cancellation come back through the sink and token.
#include "core/base/CancelToken.h"
#include "core/data/SampleSource.h"
#include "core/engine/TrainingMetrics.h"
#include "core/model/StagedNetwork.h"
#include "core/ranks/ExecutionMode.h"
#include "core/ranks/RankEnv.h"
#include "core/ranks/RankPeaks.h"
#include "core/run/RunSpec.h"

#include <functional>
#include <memory>
#include <string>

namespace splitseg::engine {
class Inferer;
struct InferOptions;
} // namespace splitseg::engine

namespace splitseg::checkpoint { struct CheckpointFile; }

namespace splitseg::launch {

// How a front end wants its run carried out.
struct Launch {
  ranks::RankEnv ranks;  // worldSize 1: this process; else this process is rank 0
  std::string resume;    // training: the checkpoint to continue ("" none)
  // `resume` already read (checkpointToResume): the run reads its checkpoint once.
  std::shared_ptr<const checkpoint::CheckpointFile> resumeFile;
  engine::MetricsSink* sink = nullptr;
  CancelToken* cancel = nullptr;
  // Called once the run is set up (over ranks: once the ranks agreed) with a line saying how it runs.
  std::function<void(const std::string&)> describe;
};

// The checkpoint a run resumes, read once: its run description is the base of the resumed run, and
// Launch::resumeFile hands the same read to the trainer.
std::shared_ptr<const checkpoint::CheckpointFile> checkpointToResume(const std::string& path);

ranks::ExecutionMode modeOf(const run::RunSpec& spec, const model::StagedNetwork& net, const ranks::RankEnv& env);

// The run's training data as its description names it (phantoms, a dataset folder, an image and
// label pair); a dataset's channel and class counts go into spec.networkOptions.
std::shared_ptr<data::SampleSource> sampleSourceFor(run::RunSpec& spec);

// Trains `net` on `source` as `spec` says. An out-of-memory step throws OutOfMemoryError saying
// which step was abandoned and what the planner would do instead; the checkpoint keeps the steps
// before it (one process; over ranks the other ranks are inside the step).
void train(const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net, std::shared_ptr<data::SampleSource> source,
           const Launch& how);

// Gives `use` an Inferer over the run's placement and precision (in eval mode, without gradients),
// the stages this process holds, and the run's inference options. Returns the other ranks'
// memory peaks (none in one process).
using InfererUse = std::function<void(engine::Inferer&, const ranks::LocalStages&, const engine::InferOptions&)>;
ranks::DevicePeaks infer(const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net, const InfererUse& use,
                         const Launch& how);

// After an out-of-memory step: what the planner would do instead on this machine's devices.
std::string planSuggestion(model::StagedNetwork& net, const run::RunSpec& spec);

} // namespace splitseg::launch
