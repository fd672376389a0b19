#include "ui/review/InferenceWorker.h"
#ifdef SPLITSEG_HAVE_POSTPROCESS
#include "core/postprocess/LargestComponent.h"
#endif

#include "core/base/Error.h"
#include "core/dist/RankRun.h"
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

void InferenceWorker::run(const InferenceJob& job) {
  // Declared first, so it runs last: gives the run's cached host memory back once its tensors are gone.
  const engine::HostCacheRelease releaseHostCache;
  InferenceResult r;
  QElapsedTimer clock;
  clock.start();
  try {
    job.network->root().eval();
    engine::InferOptions o = engine::inferOptionsOf(job.run);
    // Over ranks, one window per micro-batch in each pass: the ranks work on different windows at once.
    if (job.ranks.distributed()) o.batch = std::max(1, job.run.microBatches);
    SignalProgress sink(this);
    torch::NoGradGuard noGrad;
    std::shared_ptr<Volume> labels;
    // This process's stages (over ranks, rank 0's), whose CPU weights the meter counts as held.
    const auto placement = job.run.resolvePlacement(job.network->stageNames(), "cpu");
    const auto local = dist::localStages(*job.network, placement, job.ranks.distributed());
    const auto predict = [&](engine::Inferer& inferer) {
      dist::PeakMeter meter(local.namedRank, local.modules);
      meter.holdOnCpu(engine::predictLabelsImageBytes(*job.image, job.run.preprocessing));
      labels = std::make_shared<Volume>(engine::predictLabels(inferer, *job.image, job.run.preprocessing, o, &sink, &token_));
      r.measured = meter.peaks();
    };
    if (job.ranks.distributed()) {
      Q_EMIT progress(0.0, tr("waiting for %n other rank(s)", nullptr, job.ranks.worldSize - 1));
      for (const auto& [device, bytes] : dist::inferAsRankZero(job.ranks, job.run, job.network, predict, &token_))
        r.measured[device] = bytes;
    } else {
      // The run's preprocessing, placement and precision: what `splitseg-cli infer` does with them.
      engine::SplitExecutor executor(job.network, placement, job.run.precision);
      executor.setSharding(job.run.shardAxis, job.run.shardSlabs);
      // CPU weights channels-last before the meter starts (it cannot see the old copies freed, and
      // would count them twice), as Inferer::predict would make them; given back after.
      executor.setCpuChannelsLast(true);
      engine::Inferer inferer(executor);
      try {
        predict(inferer);
      } catch (...) {
        executor.setCpuChannelsLast(false);
        throw;
      }
      executor.setCpuChannelsLast(false);
    }
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
  } catch (const Cancelled&) {
    r.cancelled = true;
  } catch (const OutOfMemoryError& e) {
    r.error = tr("Out of memory on %1 in stage %2: %3")
                  .arg(QString::fromStdString(e.device()), QString::fromStdString(e.stage()), QString::fromStdString(e.what()));
  } catch (const std::exception& e) {
    r.error = QString::fromStdString(e.what());
  }
  r.seconds = clock.elapsed() / 1000.0;
  Q_EMIT finished(r);
}

} // namespace splitseg::ui
