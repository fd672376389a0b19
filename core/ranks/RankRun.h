#pragma once
// A training run over ranks as rank 0 starts it, for every front end (splitseg-cli train and the
// workstation): the run goes to the other ranks, each checks it can run its part, then rank 0
// trains and reports. The other ranks' side is serveAsWorker.
#include "core/base/CancelToken.h"
#include "core/data/SampleSource.h"
#include "core/ranks/RankEnv.h"
#include "core/ranks/RankPeaks.h"
#include "core/engine/TrainingMetrics.h"
#include "core/model/StagedNetwork.h"
#include "core/run/RunSpec.h"

#include <memory>
#include <string>
#include <vector>

namespace splitseg::engine { class Inferer; }
namespace splitseg::checkpoint { struct CheckpointFile; }

namespace splitseg::ranks {

class Comm;

// What every rank compares at the rendezvous: SplitSeg's and LibTorch's versions.
std::string rankIdentity();
// Why `rank` cannot run its part of `spec` here ("" when it can): a device its stages are placed
// on that this machine lacks, or a placement the ranks cannot run.
std::string rankProblem(const run::RunSpec& spec, const std::vector<std::string>& stages, int rank, int worldSize);

// One process: a placement that names ranks runs each stage on its device here (a run saved over
// ranks resumes or infers in one process). Returns whether it changed anything.
bool dropRanks(run::RunSpec& spec);

// Rank 0: publishes the run, waits until every rank is ready, trains (pipeline or every stage
// sharded), writes the checkpoint; `resumeFile`, when given, is `resume` already read. `describe` (may be empty) is called once the ranks agreed, with
// a line saying how the run is split. Stop and pause come from `cancel` between steps: every rank
// stops after the same step and the final checkpoint is written.
void trainAsRankZero(const RankEnv& env, run::RunSpec spec, std::shared_ptr<model::StagedNetwork> net,
                     std::shared_ptr<data::SampleSource> source, const std::string& resume, engine::MetricsSink* sink,
                     CancelToken* cancel = nullptr, const std::function<void(const std::string&)>& describe = {},
                     const checkpoint::CheckpointFile* resumeFile = nullptr);

// Rank 0 of inference over ranks (splitseg-cli launch ... infer, the workstation's review):
// publishes the run, waits until every rank is ready, then gives `use` an Inferer whose forward
// passes run over the ranks (the pipeline, or every stage sharded). When `use` throws between
// passes (cancelled between windows, a window that cannot be cut), the other ranks are let go
// before the exception leaves, so they exit at once instead of after the rank timeout; thrown
// inside a pass (a rank lost, out of memory), it leaves at once and the others stop when rank 0's
// connection closes. `cancel` also ends the wait for
// ranks that never join. Returns the other ranks' memory peaks while they served (RankPeaks.h).
DevicePeaks inferAsRankZero(const RankEnv& env, const run::RunSpec& spec, std::shared_ptr<model::StagedNetwork> net,
                            const std::function<void(engine::Inferer&)>& use, CancelToken* cancel = nullptr);
// A rank other than 0, after the rendezvous, of a run rank 0 published for inference: serves
// forward passes until rank 0 finishes.
void serveInference(Comm& comm, std::shared_ptr<model::StagedNetwork> net, const run::RunSpec& spec);

// A rank other than 0 (`splitseg-cli worker`, or `train`/`infer` started by torchrun with RANK > 0):
// joins rank 0's rendezvous, takes the run it published, says whether it can run its part, then
// trains its part (resumed from rank 0's checkpoint when rank 0 resumes) or serves inference.
void serveAsWorker(const RankEnv& env, int timeoutSeconds);

} // namespace splitseg::ranks
