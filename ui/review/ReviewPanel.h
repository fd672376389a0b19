#pragma once
// Review tab: run the session's network on the open volume (whole or sliding window),
// show the labels over the slices (opacity, per-label colour and visibility) and as 3D
// surfaces; with a ground truth, false positives/negatives in their own colours and Dice
// and HD95 per label. Saving goes through the main window (input geometry).
#include "ui/placement/PlannerWorker.h"
#include "ui/render/LabelStyle.h"
#include "ui/review/InferenceWorker.h"

#include <QWidget>

#include <map>
#include <memory>
#include <string>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;
class QThread;

namespace splitseg::ui {

class DatasetEvaluationDialog;
class RankProcesses;
class Session;

class ReviewPanel : public QWidget {
  Q_OBJECT
public:
  explicit ReviewPanel(Session* session, QWidget* parent = nullptr);
  ~ReviewPanel() override;

  // Recomputes metrics and overlays from the session's prediction and ground truth.
  void evaluate();
  const std::vector<splitseg::metrics::LabelMetrics>& metrics() const { return metrics_; }
  const LabelStyle& style() const { return style_; }
  bool showingErrors() const;
  bool running() const { return running_; }

  QPushButton* runButton() const { return run_; }
  QProgressBar* progressBar() const { return progress_; }
  QComboBox* modeBox() const { return mode_; }
  QSpinBox* windowBox() const { return window_; }
  // Sets the largest cubic window whose pass fits every device (the planner's largest cube), found
  // on a worker thread: the button is disabled meanwhile, fitWindowDone follows.
  QPushButton* fitWindowButton() const { return fit_; }
  bool fittingWindow() const { return fitting_; }
  QTableWidget* metricsTable() const { return table_; }
  QComboBox* displayBox() const { return display_; }
  QSlider* opacitySlider() const { return opacity_; }
  QLabel* summaryLabel() const { return summary_; }
  // The planner's peak per device for a review with the settings shown (red when it does not fit).
  QLabel* memoryLabel() const { return memory_; }
  // The planner's request for a review with the settings shown; `grid`, when given, gets the
  // image's size on the network's grid (x, y, z). Needs an open image; throws what the run or the
  // planner throws.
  planner::PlanRequest inferenceRequest(std::array<std::int64_t, 3>* grid = nullptr) const;
  // The workers a review over ranks starts on this machine (the same kind training starts).
  RankProcesses* rankProcesses() const { return ranks_; }
  // "Evaluate dataset…": every case of the session's dataset predicted, written and scored
  // (disabled in a build without ITK or with no dataset open).
  QPushButton* evaluateDatasetButton() const { return evaluateDataset_; }
  // Its dialog, made on first use (null in a build without ITK).
  DatasetEvaluationDialog* datasetEvaluation();
  // Shows the dialog and evaluates the validation split (the cases training held out) into its
  // folder; false when it cannot start (the dialog says why).
  bool evaluateValidationCases();

Q_SIGNALS:
  // The slice views and the 3D view follow these (the main window connects them).
  void overlayChanged(std::shared_ptr<const splitseg::Volume> labels, const splitseg::ui::LabelStyle& style);
  void surfacesChanged(std::shared_ptr<const splitseg::Volume> labels, const splitseg::ui::LabelStyle& style);
  void saveRequested();
  // Evaluate dataset's "Open case": the main window opens the case with this prediction over it.
  void caseOpenRequested(const QString& image, const QString& label, const QString& prediction);
  void inferenceFinished(bool ok);
  // "Largest that fits" ended: `applied` when it set a window (one undo step).
  void fitWindowDone(bool applied);

private:
  void runInference();
  // The window, overlap, mirroring and post-processing the controls show are the session's run's
  // own (they edit it at once and follow it, as the other panels do); Run inference runs it.
  void syncFromSession();
  void updateEnabled();  // window, overlap and the fit button only for a sliding window
  void updateMemoryPlan();
  void fitWindow();
  void applyFit(const PlannerWorker::WindowFit& fit);
  void endFit();  // the button back
  void onFinished(const InferenceResult& r);
  void refreshTable();
  void publishOverlay();
  void publishSurfaces();
  int maxLabel() const;

  Session* session_;
  QThread* thread_;
  InferenceWorker* worker_;
  RankProcesses* ranks_;
  QComboBox* mode_;
  QSpinBox* window_;
  QDoubleSpinBox* overlap_;
  QComboBox* mirror_;
  QCheckBox* keepLargest_;  // run.keepLargest
  QPushButton *run_, *cancel_, *save_, *fit_, *evaluateDataset_;
  DatasetEvaluationDialog* datasetDialog_ = nullptr;
  QProgressBar* progress_;
  QComboBox* display_;
  QSlider* opacity_;
  QCheckBox* surfaces_;
  QTableWidget* table_;
  QLabel* summary_;
  QLabel* memory_;
  LabelStyle style_;
  std::vector<splitseg::metrics::LabelMetrics> metrics_;
  std::vector<splitseg::metrics::LabelMetrics> pending_;  // computed by the worker for the prediction it returns
  bool hasPending_ = false;
  std::shared_ptr<const Volume> errors_;
  bool running_ = false;
  int runRanks_ = 0;  // the ranks the last run started on (0: this process alone)
  // The last run's measured peaks (InferenceResult::measured), shown beside the plan while the
  // settings and the image are those it ran with (memoryKey).
  std::map<std::string, std::int64_t> measured_;
  std::string measuredKey_, runKey_;
  std::string memoryKey() const;
  // "Largest that fits" runs there; a newer request or the panel going cancels the one running.
  PlannerWorker* planner_;
  bool fitting_ = false;
  int fitRequest_ = 0;  // the newest request's number: older results are dropped
  std::string fitSearchKey_;  // fitKey() when the running search started
  // What the last "Largest that fits" found, shown while the window is the one it set.
  int fittedEdge_ = 0;
  QString fitNote_;
  std::string fitKey_;
  std::string fitKey() const;  // memoryKey and the devices' capacities
};

} // namespace splitseg::ui

Q_DECLARE_METATYPE(std::shared_ptr<const splitseg::Volume>)
Q_DECLARE_METATYPE(splitseg::ui::LabelStyle)
