#pragma once
// Training tab: data, network size, patch, batch, steps/epochs, learning rate, precision;
// Start/Pause/Resume/Stop; progress with ETA; live charts. The run happens on a worker
// QThread (TrainingWorker); this panel only receives queued signals, and a heartbeat
// measures the longest UI-thread stall of each run.
#include "core/engine/TrainingMetrics.h"

#include <QElapsedTimer>
#include <QWidget>

#include <nlohmann/json.hpp>

#include <deque>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QThread;
class QDialog;

namespace splitseg::ui { class RankProcesses; struct TrainingJob; }

namespace splitseg::ui {

class Session;
class StallMeter;
class DeviceTimeline;
class TrainingCharts;
class TrainingWorker;

class TrainingPanel : public QWidget {
  Q_OBJECT
public:
  explicit TrainingPanel(Session* session, QWidget* parent = nullptr);
  ~TrainingPanel() override;

  bool running() const { return running_; }
  TrainingCharts* charts() const { return charts_; }
  DeviceTimeline* timeline() const { return timeline_; }
  double lastStallMs() const;
  double lastStallP99Ms() const;
  QString lastError() const { return lastError_; }

  // The controls, for scripted use and tests (they act as a user would).
  QPushButton* startButton() const { return start_; }
  // The precision text the last run handed the engine ("fp32", "bf16:enc0,dec0").
  const std::string& lastRunPrecision() const { return lastRunPrecision_; }
  QPushButton* pauseButton() const { return pause_; }
  QPushButton* stopButton() const { return stop_; }
  QThread* workerThread() const { return thread_; }
  TrainingWorker* worker() const { return worker_; }  // tests count its steps where they happen
  RankProcesses* rankProcesses() const { return ranks_; }
  QComboBox* architectureBox() const { return arch_; }
  QPushButton* optionsButton() const { return options_; }
  QDialog* optionsDialog() const { return optionsDialog_; }  // the local ranks of a run over ranks  // tests hold it to order Start and Stop
  QComboBox* dataBox() const { return data_; }
  // "Then evaluate the validation cases": with a dataset, a run that ends (not stopped, no error)
  // is followed by Review's Evaluate dataset on the cases training held out (the main window
  // connects runFinished to it), as nnU-Net's training ends with its validation.
  QCheckBox* evaluateAfterBox() const { return evaluateAfter_; }
  bool evaluatesAfterwards() const;
  QSpinBox* baseBox() const { return base_; }
  QSpinBox* depthBox() const { return depth_; }
  QSpinBox* patchBox() const { return patch_; }
  QComboBox* intensityBox() const { return intensity_; }
  QSpinBox* batchBox() const { return batch_; }
  QSpinBox* stepsBox() const { return steps_; }
  QSpinBox* validateBox() const { return validate_; }
  QSpinBox* budgetBox() const { return budget_; }
  QDoubleSpinBox* learningRateBox() const { return lr_; }
  QProgressBar* progressBar() const { return progress_; }

Q_SIGNALS:
  void runStarted();
  void stepDone(qint64 step, qint64 total);
  void runFinished(bool stopped, const QString& error);

private:
  void startRun();
  void togglePause();
  void stopRun();
  void onStarted(qint64 total);
  void onStep(const engine::StepMetrics& m);
  void onValidation(const engine::ValidationMetrics& m);
  void onFinished(bool stopped, const QString& error);
  void applyNetwork();
  void editNetworkOptions();
  nlohmann::json chosenOptions() const;
  void rebuildNetwork(const nlohmann::json& options);
  void syncFromSession();
  void setRunning(bool running);
  void showError(const QString& text);
  // A placement that names ranks: starts the local ones, says how to start the remote ones, and
  // fills the job's rank environment. False (error shown) when the run cannot go over ranks.
  bool prepareRanks(TrainingJob& job);

  Session* session_;
  QThread* thread_;
  TrainingWorker* worker_;
  RankProcesses* ranks_;
  StallMeter* stall_;
  TrainingCharts* charts_;
  DeviceTimeline* timeline_;
  QComboBox* data_;
  QCheckBox* evaluateAfter_;
  QSpinBox *base_, *depth_, *patch_, *batch_, *steps_, *epochs_, *validate_, *budget_;
  QDoubleSpinBox* lr_;
  QComboBox* precision_;
  QComboBox* intensity_;
  QPushButton *start_, *pause_, *stop_, *applyNet_, *options_;
  QComboBox* arch_;
  QDialog* optionsDialog_ = nullptr;  // while Options… is open (tests)
  std::string lastRunPrecision_;
  QProgressBar* progress_;
  QLabel *status_, *error_, *stallLabel_;
  bool running_ = false;
  qint64 total_ = 0;
  std::deque<double> recentSeconds_;
  QString lastError_;
};

} // namespace splitseg::ui
