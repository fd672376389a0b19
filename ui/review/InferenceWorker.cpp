#include "ui/review/InferenceWorker.h"
#ifdef SPLITSEG_HAVE_POSTPROCESS
#include "core/postprocess/LargestComponent.h"
#endif

#include "core/base/Error.h"
#include "core/ranks/RankRun.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Inferer.h"

#include <QElapsedTimer>

#include <algorithm>

namespace splitseg::ui {

namespace {
class SignalProgress final : public ProgressSink {
public:
  explicit SignalProgress(InferenceWorker* w) : w_(w) {}
  void progress(double f, const std::string& m) override { Q_EMIT w_->progress(f, QString::fromStdString(m)); }

private:
  InferenceWorker* w_;
};
} // namespace

void describeFailure(std::exception_ptr failure, QString& error, bool& cancelled) {
  try {
    std::rethrow_exception(failure);
  } catch (const Cancelled&) {
    cancelled = true;
  } catch (const OutOfMemoryError& e) {
    error = InferenceWorker::tr("Out of memory on %1 in stage %2: %3")
                .arg(QString::fromStdString(e.device()), QString::fromStdString(e.stage()), QString::fromStdString(e.what()));
  } catch (const std::exception& e) {
    error = QString::fromStdString(e.what());
  }
}

std::map<std::string, std::int64_t> withInferer(const std::shared_ptr<model::StagedNetwork>& network, const run::RunSpec& run,
                                                const ranks::RankEnv& ranks, const InfererUse& use, CancelToken* cancel) {
  launch::Launch how;
  how.ranks = ranks;
  how.cancel = cancel;
  return launch::infer(run, network, use, how);
}

void InferenceWorker::run(const InferenceJob& job) {
  // Declared first, so it runs last: gives the run's cached host memory back once its tensors are gone.
  const engine::HostCacheRelease releaseHostCache;
  InferenceResult r;
  QElapsedTimer clock;
  clock.start();
  try {
    SignalProgress sink(this);
    std::shared_ptr<Volume> labels;
    if (job.ranks.distributed()) Q_EMIT progress(0.0, tr("waiting for %n other rank(s)", nullptr, job.ranks.worldSize - 1));
    const auto others = withInferer(job.network, job.run, job.ranks, [&](engine::Inferer& inferer, const ranks::LocalStages& local,
                                                                        const engine::InferOptions& o) {
      labels = std::make_shared<Volume>(ranks::predictLabelsMeasured(inferer, local, *job.image, job.run.preprocessing, o,
                                                                    job.run.cpuBudgetBytes, r.measured, &sink, &token_));
    }, &token_);
    for (const auto& [device, bytes] : others) r.measured[device] = bytes;
#ifdef SPLITSEG_HAVE_POSTPROCESS
    if (job.run.keepLargest) {
      Q_EMIT progress(1.0, tr("keeping each label's largest region"));
      for (const auto& c : postprocess::keepLargestComponents(*labels)) r.removedVoxels += c.removed;
    }
#endif
    r.labels = labels;
    if (job.truth && job.truth->geometry().sameGrid(labels->geometry())) {
      Q_EMIT progress(1.0, tr("computing Dice and HD95"));
      r.metrics = splitseg::metrics::SegmentationMetrics::compute(*labels, *job.truth);
    }
  } catch (...) {
    describeFailure(std::current_exception(), r.error, r.cancelled);
  }
  r.seconds = clock.elapsed() / 1000.0;
  Q_EMIT finished(r);
}

} // namespace splitseg::ui
