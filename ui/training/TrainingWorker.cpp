#include "ui/training/TrainingWorker.h"

#include "core/base/Error.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/PlannedPeaks.h"
#include "core/launch/RunLauncher.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace splitseg::ui {

namespace {
// The engine's sink interface as signals of the worker (emitted on the worker thread).
class SignalSink final : public engine::MetricsSink {
public:
  explicit SignalSink(TrainingWorker* w) : w_(w) {}
  void onStep(const engine::StepMetrics& m) override { Q_EMIT w_->step(m); }
  void onValidation(const engine::ValidationMetrics& m) override { Q_EMIT w_->validated(m); }
  void onMessage(const std::string& text) override { Q_EMIT w_->message(QString::fromStdString(text)); }

private:
  TrainingWorker* w_;
};
} // namespace

void TrainingWorker::run(const TrainingJob& c) {
  // Training takes every core it is given; at the same priority as the UI thread, a 2-core
  // machine left the UI thread waiting for a time slice (UI stall p99 14-19 ms, longest 70-130 ms
  // in splitseg-bench-ui on this CI machine). Linux's nice is per thread and the thread pool
  // this thread starts inherits it, so the whole run yields to the UI and uses idle CPU only.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kTrainingNice);
  // Declared first, so it runs last: gives the run's cached host memory back once its tensors are gone.
  const engine::HostCacheRelease releaseHostCache;
  SignalSink sink(this);
  try {
    auto source = c.makeSource ? c.makeSource() : c.source;
    Q_EMIT message(tr("Training on %1").arg(QString::fromStdString(source->describe())));
    try {
      QVariantMap plan;
      for (const auto& [device, bytes] : engine::plannedStepPeaks(*c.network, c.run))
        plan.insert(QString::fromStdString(device), QVariant::fromValue<qint64>(bytes));
      Q_EMIT planned(plan);
    } catch (const std::exception& e) {  // the run itself decides; the chart goes without a plan line
      Q_EMIT message(tr("No memory plan for this run (%1)").arg(QString::fromUtf8(e.what())));
    }
    if (c.ranks.distributed()) {
      QString wait = tr("Waiting for %1 rank(s) to join (%2)").arg(c.ranks.worldSize - 1).arg(QString::fromStdString(c.ranks.describe()));
      if (!c.joinHint.empty()) wait += ": " + QString::fromStdString(c.joinHint);
      Q_EMIT message(wait);
    }
    Q_EMIT started(c.run.totalSteps());
    launch::Launch how;
    how.ranks = c.ranks;
    how.sink = &sink;
    how.cancel = &token_;
    if (c.ranks.distributed()) how.describe = [this](const std::string& line) { Q_EMIT message(QString::fromStdString(line)); };
    launch::train(c.run, c.network, source, how);
    c.network->root().eval();
    Q_EMIT finished(token_.cancelled(), {});
  } catch (const Cancelled&) {
    Q_EMIT finished(true, {});
  } catch (const OutOfMemoryError& e) {
    Q_EMIT finished(false, tr("Out of memory on %1 in stage %2: %3")
                               .arg(QString::fromStdString(e.device()), QString::fromStdString(e.stage()),
                                    QString::fromStdString(e.what())));
  } catch (const std::exception& e) {
    Q_EMIT finished(false, QString::fromStdString(e.what()));
  }
}

} // namespace splitseg::ui
