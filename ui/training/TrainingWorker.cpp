#include "ui/training/TrainingWorker.h"

#include "core/base/Error.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Trainer.h"

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

void TrainingWorker::run(const TrainingConfig& c) {
  token_.reset();
  // Declared first, so it runs last: gives the run's cached host memory back once its tensors are gone.
  const engine::HostCacheRelease releaseHostCache;
  SignalSink sink(this);
  try {
    engine::TrainerOptions o;
    o.steps = c.steps;
    o.epochs = c.epochs;
    o.stepsPerEpoch = c.stepsPerEpoch;
    o.batch = c.batch;
    o.learningRate = c.learningRate;
    o.patch = c.patch;
    o.seed = c.seed;
    o.validateEvery = c.validateEvery;
    o.cpuBudgetBytes = c.cpuBudgetBytes;
    engine::ExecutorOptions exec;
    exec.setPrecisionText(c.precision, c.network->stageNames());
    exec.checkpointStages = c.checkpointStages;
    auto source = c.makeSource ? c.makeSource() : c.source;
    Q_EMIT message(tr("Training on %1").arg(QString::fromStdString(source->describe())));
    engine::Trainer trainer(c.network, c.placement, source, o, exec);
    Q_EMIT started(o.totalSteps());
    trainer.run(&sink, &token_);
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
