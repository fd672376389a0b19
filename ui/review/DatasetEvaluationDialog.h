#pragma once
// Review > Evaluate dataset…: the session's network and run over every case of the open dataset
// (its validation split, training split or all), each prediction written as <case>.nii.gz into a
// folder and scored against its ground truth: a table of Dice per label and HD95 per case, filled
// as cases finish, nnU-Net's summary (per label, over the cases) under it and in summary.json.
// Double-clicking a case opens it with its prediction over it. The GUI's `splitseg-cli infer
// --dataset`: both go through core/evaluate.
#include "ui/review/DatasetEvaluationWorker.h"

#include "core/dataset/Dataset.h"

#include <QDialog>

#include <map>
#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QThread;

namespace splitseg::ui {

class RankProcesses;
class Session;

class DatasetEvaluationDialog : public QDialog {
  Q_OBJECT
public:
  explicit DatasetEvaluationDialog(Session* session, QWidget* parent = nullptr);
  ~DatasetEvaluationDialog() override;

  // Shows the session's dataset (its cases and split) and run; the dataset is read again when it is
  // another folder or `reread` (when the dialog is shown: its files may have changed).
  void refresh(bool reread = false);
  // Starts the evaluation with the choices shown; false (and the reason in the status line) when
  // it cannot start: no dataset, no network, a refusal of the output folder, the session busy.
  bool evaluate();
  bool running() const { return running_; }
  // Open results…: an earlier evaluation's summary.json shown as it was (its cases open as after a
  // run); false, and the reason in the status line, for a file that is no such summary.
  bool loadResults(const QString& summaryPath);

  QComboBox* casesBox() const { return cases_; }
  QLineEdit* outputEdit() const { return output_; }
  QPushButton* evaluateButton() const { return evaluate_; }
  QPushButton* cancelButton() const { return cancel_; }
  QPushButton* openResultsButton() const { return openResults_; }
  QProgressBar* progressBar() const { return progress_; }
  QTableWidget* table() const { return table_; }
  QLabel* statusLabel() const { return status_; }
  QLabel* summaryLabel() const { return summary_; }
  // The last finished evaluation's (empty before one has finished).
  const evaluate::EvaluationSummary& lastSummary() const { return last_; }

Q_SIGNALS:
  // The main window opens the case (image and ground truth) with this prediction over it.
  void caseOpenRequested(const QString& image, const QString& label, const QString& prediction);
  void evaluationFinished(bool ok);

protected:
  void showEvent(QShowEvent* e) override;

private:
  void onCaseStarted(int index);
  void onCaseFinished(const DatasetCaseResult& r);
  // A row per case of plan_ (Dice columns: columns_, named by names_), then each case's figures,
  // then the mean row and the summary line from last_.
  void setUpTable(const QString& firstStatus);
  void showCase(int row, const evaluate::CaseResult& r);
  void showSummary();
  void onFinished(const DatasetEvaluationResult& r);
  void openRow(int row);
  void setStatus(const QString& text, bool error);
  void updateEnabled();
  int labelColumn(int label) const;  // the table column of a label's Dice (-1: none)

  Session* session_;
  QThread* thread_;
  DatasetEvaluationWorker* worker_;
  RankProcesses* ranks_;
  QLabel *header_, *runLine_, *status_, *summary_;
  QComboBox* cases_;
  QLineEdit* output_;
  QPushButton *browse_, *evaluate_, *cancel_, *open_, *openResults_;
  QProgressBar* progress_;
  QTableWidget* table_;
  std::optional<dataset::Dataset> dataset_;
  QString datasetError_;
  QString datasetFolder_;  // the folder dataset_ was read from (and the output folder's default made for)
  std::vector<int> labels_;  // the dataset's foreground labels
  std::vector<int> columns_;  // the table's labels, one Dice column each
  std::map<int, std::string> names_;  // their names (the dataset's)
  evaluate::EvaluationPlan plan_;  // the running or last evaluation's
  evaluate::EvaluationSummary last_;
  bool running_ = false;
  int runRanks_ = 0;
};

} // namespace splitseg::ui
