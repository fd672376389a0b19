#pragma once
// Runs the engine's Inferer (whole volume or sliding window) on a worker QThread and, with a
// ground truth, the metrics too, so neither blocks the UI thread. A placement over ranks runs with
// this process as rank 0: each window goes through the ranks (pipeline or every stage sharded).
#include "core/base/CancelToken.h"
#include "core/dist/RankEnv.h"
#include "core/run/RunSpec.h"
#include "core/volume/Volume.h"
#include "core/metrics/SegmentationMetrics.h"

#include <QMetaType>
#include <QObject>

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <memory>

namespace splitseg::model { class StagedNetwork; }
namespace splitseg::engine { class Inferer; struct InferOptions; }
namespace splitseg::dist { struct LocalStages; }

namespace splitseg::ui {

// Calls `use` with an Inferer for the run's placement: in this process (a SplitExecutor, CPU
// weights channels-last while it runs) or, over ranks, as rank 0 once the others have joined; the
// network in eval mode, no gradients, and the run's inference options (over ranks one window per
// micro-batch in each pass, so that the ranks work on different windows at once). `local`: this
// process's stages, for a PeakMeter. Returns the other ranks' measured peaks (none in one
// process). For the review's prediction and its dataset evaluation alike.
using InfererUse = std::function<void(engine::Inferer&, const dist::LocalStages&, const engine::InferOptions&)>;
std::map<std::string, std::int64_t> withInferer(const std::shared_ptr<model::StagedNetwork>& network, const run::RunSpec& run,
                                                const dist::RankEnv& ranks, const InfererUse& use, CancelToken* cancel);
// What stopped a run, for the panel: `cancelled` for Cancelled, else the error's line (out of
// memory naming its device and stage). Call from a catch (...) with std::current_exception().
void describeFailure(std::exception_ptr failure, QString& error, bool& cancelled);

struct InferenceJob {
  std::shared_ptr<model::StagedNetwork> network;
  // The document's run (a copy): placement, per-stage precision, preprocessing, window, overlap,
  // mirroring, largest-region post-processing.
  run::RunSpec run;
  std::shared_ptr<const Volume> image;
  std::shared_ptr<const Volume> truth;      // optional
  // Over ranks (worldSize > 1): this process is rank 0 and serves the rendezvous; the other ranks
  // join it (RankProcesses, or workers on other machines). Rank 0's weights go to them.
  dist::RankEnv ranks;
};

struct InferenceResult {
  std::shared_ptr<const Volume> labels;     // in the image's geometry
  std::vector<splitseg::metrics::LabelMetrics> metrics;        // empty without ground truth
  double seconds = 0;
  // Each device's measured tensor peak over the prediction, named as the memory planner names it
  // ("cpu", "r1:cpu"; dist::PeakMeter); over ranks, every rank's. Empty when it did not finish.
  std::map<std::string, std::int64_t> measured;
  std::int64_t removedVoxels = 0;  // run.keepLargest: voxels outside their label's largest region
  QString error;
  bool cancelled = false;
};

class InferenceWorker : public QObject {
  Q_OBJECT
public:
  // Call on the UI thread before queuing run(), so a Cancel right after the start is honoured.
  void prepare() { token_.reset(); }
  void run(const InferenceJob& job);
  void cancel() { token_.cancel(); }

Q_SIGNALS:
  void progress(double fraction, const QString& message);
  void finished(const splitseg::ui::InferenceResult& result);

private:
  CancelToken token_;
};

} // namespace splitseg::ui

Q_DECLARE_METATYPE(splitseg::ui::InferenceResult)
