#pragma once
// Runs the engine's Trainer on a worker QThread. The engine reports through MetricsSink and
// obeys a CancelToken; this object turns the reports into signals, which Qt queues to the
// receivers in the UI thread. Pause/resume/stop are thread-safe calls on the token.
#include "core/base/CancelToken.h"
#include "core/data/SampleSource.h"
#include "core/ranks/RankEnv.h"
#include "core/engine/TrainingMetrics.h"
#include "core/run/RunSpec.h"

#include <QMetaType>
#include <QObject>
#include <QVariantMap>

#include <atomic>
#include <functional>
#include <memory>
#include <set>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::ui {

// A run for the worker: the document's run description (a copy) and the live objects it runs on.
struct TrainingJob {
  std::shared_ptr<model::StagedNetwork> network;
  run::RunSpec run;
  std::shared_ptr<data::SampleSource> source;
  // Built on the worker thread when set (reading a dataset takes a while): replaces `source`.
  std::function<std::shared_ptr<data::SampleSource>()> makeSource;
  // A run over ranks (worldSize > 1): this process is rank 0 and serves the rendezvous; the
  // other ranks join it (RankProcesses, or workers on other machines).
  ranks::RankEnv ranks;
  std::string joinHint;  // how to start the remote ranks, shown while waiting for them
};

class TrainingWorker : public QObject {
  Q_OBJECT
public:
  // The nice value the training thread (and the threads it starts) and local rank processes run
  // at: below the UI, which then never waits behind them for a core.
  static constexpr int kTrainingNice = 10;

  TrainingWorker() = default;

  // Call on the UI thread before queuing run(): a Stop pressed between Start and the worker
  // picking the run up is then honoured, not reset away.
  void prepare() { token_.reset(); }
  // Blocks the worker thread until the run ends; call through a queued invocation.
  void run(const TrainingJob& job);
  void pause() { token_.pause(); }
  void resume() { token_.resume(); }
  void stop() { token_.cancel(); }
  bool paused() const { return token_.paused(); }

Q_SIGNALS:
  void started(qint64 totalSteps);
  // Before the first step: the planner's peak per device (engine::plannedStepPeaks), bytes by the
  // memory chart's device names.
  void planned(const QVariantMap& bytesByDevice);
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
