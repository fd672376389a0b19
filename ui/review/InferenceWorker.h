#pragma once
// Runs the engine's Inferer (whole volume or sliding window) on a worker QThread and, with a
// ground truth, the metrics too, so neither blocks the UI thread. A placement over ranks runs with
// this process as rank 0: each window goes through the ranks (pipeline or every stage sharded).
#include "core/base/CancelToken.h"
#include "core/launch/RunLauncher.h"
#include "core/ranks/RankEnv.h"
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
namespace splitseg::ranks { struct LocalStages; }

namespace splitseg::ui {

// Calls `use` with an Inferer for the run's placement through the run launcher (launch::infer:
// this process, or rank 0 over the ranks). Returns the other ranks' measured peaks. For the
// review's prediction and its dataset evaluation alike.
using InfererUse = launch::InfererUse;
std::map<std::string, std::int64_t> withInferer(const std::shared_ptr<model::StagedNetwork>& network, const run::RunSpec& run,
                                                const ranks::RankEnv& ranks, const InfererUse& use, CancelToken* cancel);
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
  ranks::RankEnv ranks;
};

struct InferenceResult {
  std::shared_ptr<const Volume> labels;     // in the image's geometry
  std::vector<splitseg::metrics::LabelMetrics> metrics;        // empty without ground truth
  double seconds = 0;
  // Each device's measured tensor peak over the prediction, named as the memory planner names it
  // ("cpu", "r1:cpu"; ranks::PeakMeter); over ranks, every rank's. Empty when it did not finish.
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
