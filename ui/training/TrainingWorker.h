#pragma once
// Runs the engine's Trainer on a worker QThread. The engine reports through MetricsSink and
// obeys a CancelToken; this object turns the reports into signals, which Qt queues to the
// receivers in the UI thread. Pause/resume/stop are thread-safe calls on the token.
#include "core/base/CancelToken.h"
#include "core/data/SampleSource.h"
#include "core/engine/Metrics.h"
#include "core/placement/Placement.h"

#include <QMetaType>
#include <QObject>

#include <atomic>
#include <functional>
#include <memory>
#include <set>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::ui {

struct TrainingConfig {
  std::shared_ptr<model::StagedNetwork> network;
  placement::Placement placement;
  std::shared_ptr<data::SampleSource> source;
  // Built on the worker thread when set (reading a dataset takes a while): replaces `source`.
  std::function<std::shared_ptr<data::SampleSource>()> makeSource;
  std::array<std::int64_t, 3> patch{32, 32, 32};
  int batch = 1;
  std::int64_t steps = 100;
  int epochs = 0;
  std::int64_t stepsPerEpoch = 50;
  double learningRate = 1e-3;
  std::string precision = "fp32";  // as --precision: fp32, bf16, bf16:enc0,dec0
  std::set<std::string> checkpointStages;
  std::int64_t validateEvery = 10;
  std::int64_t cpuBudgetBytes = 0;
  std::uint64_t seed = 0;
};

class TrainingWorker : public QObject {
  Q_OBJECT
public:
  TrainingWorker() = default;

  // Blocks the worker thread until the run ends; call through a queued invocation.
  void run(const TrainingConfig& config);
  void pause() { token_.pause(); }
  void resume() { token_.resume(); }
  void stop() { token_.cancel(); }
  bool paused() const { return token_.paused(); }

Q_SIGNALS:
  void started(qint64 totalSteps);
  void step(const splitseg::engine::StepMetrics& metrics);
  void validated(const splitseg::engine::ValidationMetrics& metrics);
  void message(const QString& text);
  // stopped: the user stopped it; error: non-empty when the run failed (names stage and device).
  void finished(bool stopped, const QString& error);

private:
  CancelToken token_;
};

} // namespace splitseg::ui

Q_DECLARE_METATYPE(splitseg::engine::StepMetrics)
Q_DECLARE_METATYPE(splitseg::engine::ValidationMetrics)
