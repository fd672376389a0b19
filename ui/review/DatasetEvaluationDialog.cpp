#include "ui/review/DatasetEvaluationDialog.h"

#include "ui/placement/StageMemoryModel.h"
#include "ui/session/Session.h"
#include "ui/training/RankProcesses.h"

#include "core/base/Units.h"
#include "core/dataset/DatasetSource.h"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QTextDocument>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace splitseg::ui {

namespace {
QString dice(double d) { return QString::number(d, 'f', 4); }
QString mm(double d) { return std::isfinite(d) ? QString::number(d, 'f', 2) : QString("∞"); }
// Red (0) to green (1), light enough for black text.
QColor diceColour(double d) { return QColor::fromHsvF(static_cast<float>(std::clamp(d, 0.0, 1.0) / 3.0), 0.35f, 1.0f); }
QTableWidgetItem* item(const QString& text) {
  auto* i = new QTableWidgetItem(text);
  i->setFlags(i->flags() & ~Qt::ItemIsEditable);
  return i;
}

QTableWidgetItem* peakItem(const evaluate::DevicePeaks& peaks, const evaluate::DevicePeaks& planned) {
  // The device that held most (what decides whether a larger case fits); every device in the tip,
  // each beside its plan.
  if (peaks.empty()) return nullptr;
  const auto top = std::max_element(peaks.begin(), peaks.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  auto* cell = item(DatasetEvaluationDialog::tr("%1 (%2)").arg(QString::fromStdString(formatBytes(double(top->second))), QString::fromStdString(top->first)));
  cell->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(top->second));
  QStringList tip;
  for (const auto& [device, bytes] : peaks) {
    QString line = DatasetEvaluationDialog::tr("%1: %2 measured").arg(QString::fromStdString(device), QString::fromStdString(formatBytes(double(bytes))));
    // Rank 0's devices are named with or without "r0:" on either side.
    auto plan = planned.find(device);
    if (plan == planned.end()) plan = planned.find(device.rfind("r0:", 0) == 0 ? device.substr(3) : "r0:" + device);
    if (plan != planned.end())
      line += DatasetEvaluationDialog::tr(", %1 planned").arg(QString::fromStdString(formatBytes(double(plan->second))));
    tip << line;
  }
  // Plain text: device names may come from someone else's summary.json.
  cell->setToolTip(Qt::convertFromPlainText(
      DatasetEvaluationDialog::tr("Tensor peak over this case, per device, measured and as the memory planner expected it:\n%1").arg(tip.join("\n"))));
  return cell;
}
} // namespace

DatasetEvaluationDialog::DatasetEvaluationDialog(Session* session, QWidget* parent)
    : QDialog(parent), session_(session), thread_(new QThread(this)), worker_(new DatasetEvaluationWorker) {
  setWindowTitle(tr("Evaluate dataset"));
  qRegisterMetaType<DatasetCaseResult>();
  qRegisterMetaType<DatasetEvaluationResult>();
  worker_->moveToThread(thread_);
  connect(thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_->start();
  connect(worker_, &DatasetEvaluationWorker::caseStarted, this, &DatasetEvaluationDialog::onCaseStarted);
  connect(worker_, &DatasetEvaluationWorker::caseFinished, this, &DatasetEvaluationDialog::onCaseFinished);
  connect(worker_, &DatasetEvaluationWorker::finished, this, &DatasetEvaluationDialog::onFinished);
  connect(worker_, &DatasetEvaluationWorker::progress, this, [this](double f, const QString& m) {
    progress_->setValue(static_cast<int>(f * 1000));
    progress_->setFormat(QString("%1 — %p%").arg(m));
  });
  ranks_ = new RankProcesses(this);
  connect(ranks_, &RankProcesses::rankFailed, this, [this](int rank, const QString& why) {
    session_->setRankProblem(rank, why);
    if (running_) setStatus(tr("%1 — the evaluation stops within the rank timeout").arg(why), true);
  });

  auto* layout = new QVBoxLayout(this);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  layout->addWidget(header_);
  runLine_ = new QLabel(this);
  runLine_->setWordWrap(true);
  runLine_->setToolTip(tr("The session's run, as Review and All settings show it: change it there"));
  layout->addWidget(runLine_);
  auto* form = new QFormLayout;
  cases_ = new QComboBox(this);
  cases_->setToolTip(tr("The validation split is the cases training held out (the run's validation fraction, seed 0)"));
  form->addRow(tr("Cases"), cases_);
  output_ = new QLineEdit(this);
  output_->setToolTip(tr("<case>.nii.gz for every case and summary.json go here; the dataset's own files are never overwritten"));
  browse_ = new QPushButton(tr("Browse…"), this);
  connect(browse_, &QPushButton::clicked, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Folder for the predictions"), output_->text());
    if (!d.isEmpty()) output_->setText(d);  // kept until another dataset is open
  });
  auto* outRow = new QHBoxLayout;
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse_);
  form->addRow(tr("Predictions into"), outRow);
  layout->addLayout(form);

  auto* buttons = new QHBoxLayout;
  evaluate_ = new QPushButton(tr("Evaluate"), this);
  evaluate_->setDefault(true);
  cancel_ = new QPushButton(tr("Cancel"), this);
  open_ = new QPushButton(tr("Open case"), this);
  open_->setToolTip(tr("Opens the selected case with its prediction over it (or double-click a row)"));
  auto* close = new QPushButton(tr("Close"), this);
  connect(evaluate_, &QPushButton::clicked, this, [this] { evaluate(); });
  connect(cancel_, &QPushButton::clicked, this, [this] { worker_->cancel(); });
  connect(open_, &QPushButton::clicked, this, [this] { openRow(table_->currentRow()); });
  openResults_ = new QPushButton(tr("Open results…"), this);
  openResults_->setToolTip(tr("Show an earlier evaluation again from its summary.json"));
  connect(openResults_, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("An evaluation's summary"), output_->text(), tr("Evaluation summary (summary.json)"));
    if (!f.isEmpty()) loadResults(f);
  });
  connect(close, &QPushButton::clicked, this, &QDialog::hide);
  for (auto* b : {evaluate_, cancel_, open_, openResults_}) buttons->addWidget(b);
  buttons->addStretch(1);
  buttons->addWidget(close);
  layout->addLayout(buttons);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setFormat(tr("not evaluated yet"));
  progress_->setValue(0);
  layout->addWidget(progress_);
  status_ = new QLabel(this);
  status_->setTextFormat(Qt::PlainText);  // error messages carry names from other people's files
  status_->setWordWrap(true);
  layout->addWidget(status_);
  table_ = new QTableWidget(0, 0, this);
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) { openRow(row); });
  connect(table_, &QTableWidget::currentCellChanged, this, [this] { updateEnabled(); });
  layout->addWidget(table_, 1);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  resize(760, 560);

  connect(session_, &Session::datasetChanged, this, [this] { if (!running_) refresh(); });
  connect(session_, &Session::runChanged, this, [this] { if (!running_) refresh(); });
  connect(session_, &Session::busyChanged, this, [this] { updateEnabled(); });
  refresh();
}

DatasetEvaluationDialog::~DatasetEvaluationDialog() {
  worker_->cancel();
  thread_->quit();
  thread_->wait();
}

void DatasetEvaluationDialog::showEvent(QShowEvent* e) {
  if (!running_) refresh(true);
  QDialog::showEvent(e);
}

void DatasetEvaluationDialog::setStatus(const QString& text, bool error) {
  status_->setText(text);
  status_->setStyleSheet(error ? "color: #d04040;" : QString());
}

void DatasetEvaluationDialog::updateEnabled() {
  const bool idle = !running_;
  evaluate_->setEnabled(idle && dataset_ && !session_->busy());
  cancel_->setEnabled(running_);
  cases_->setEnabled(idle);
  output_->setEnabled(idle);
  browse_->setEnabled(idle);
  openResults_->setEnabled(idle);
  const int row = table_->currentRow();
  open_->setEnabled(row >= 0 && row < static_cast<int>(plan_.files.size()) && QFileInfo::exists(QString::fromStdString(plan_.files[row].prediction)));
}

void DatasetEvaluationDialog::refresh(bool reread) {
  const QString folder = session_->datasetFolder();
  const run::RunSpec& run = session_->run();
  const QString previous = cases_->currentData().toString();
  const bool another = folder != datasetFolder_;
  if (another || reread) {
    dataset_.reset();
    datasetError_.clear();
    if (!folder.isEmpty()) {
      try {
        dataset_ = dataset::openDataset(folder.toStdString());
      } catch (const std::exception& e) {
        datasetError_ = QString::fromStdString(e.what());
      }
    }
    datasetFolder_ = folder;
  }
  labels_.clear();
  cases_->clear();
  if (!dataset_) {
    header_->setText(folder.isEmpty() ? tr("No dataset open: open one in the Data panel (Open dataset…) to evaluate every case")
                                      : tr("The dataset at %1 cannot be read: %2").arg(folder, datasetError_));
  } else {
    const std::size_t n = dataset_->cases.size();
    const auto split = dataset::splitCases(n, run.data.validationFraction, dataset::DatasetSourceOptions{}.splitSeed);
    header_->setText(tr("Dataset <b>%1</b>: %n case(s) in %2", nullptr, static_cast<int>(n))
                         .arg(QString::fromStdString(dataset_->name).toHtmlEscaped(), folder.toHtmlEscaped()));
    cases_->addItem(tr("Validation split (%n case(s) training holds out)", nullptr, static_cast<int>(split.validation.size())), "validation");
    cases_->addItem(tr("Training split (%n case(s))", nullptr, static_cast<int>(split.train.size())), "training");
    cases_->addItem(tr("All cases (%n)", nullptr, static_cast<int>(n)), "all");
    if (const int i = cases_->findData(previous); i >= 0) cases_->setCurrentIndex(i);
    for (const auto& [value, name] : dataset_->labels)
      if (value > 0) labels_.push_back(value);
    // Each dataset its own predictions: the default folder in it, until the user picks another.
    if (another || output_->text().isEmpty()) output_->setText(QDir(folder).filePath("splitseg_predictions"));
  }
  const auto& w = run.window;
  const bool whole = w[0] <= 0 && w[1] <= 0 && w[2] <= 0;
  runLine_->setText(tr("Run: %1, overlap %2, mirroring %3, largest region %4 (the session's run, as in Review)")
                        .arg(whole ? tr("whole volume") : tr("window %1×%2×%3").arg(w[0]).arg(w[1]).arg(w[2]))
                        .arg(run.overlap)
                        .arg(run::mirrorPasses(run.mirror) > 1 ? QString::fromStdString(run::mirrorToString(run.mirror)) : tr("off"))
                        .arg(run.keepLargest ? tr("kept") : tr("off")));
  updateEnabled();
}

int DatasetEvaluationDialog::labelColumn(int label) const {
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == label) return 2 + static_cast<int>(i);
  return -1;
}

bool DatasetEvaluationDialog::evaluate() {
  if (running_) return false;
  if (!dataset_) {
    setStatus(header_->text(), true);
    return false;
  }
  if (session_->busy()) {
    setStatus(tr("A training or inference run is using the network: wait for it or stop it"), true);
    return false;
  }
  if (!session_->network()) {
    setStatus(tr("No network"), true);
    return false;
  }
  std::string stage;
  if (const auto* d = session_->planningOnlyPlacement(&stage)) {
    setStatus(tr("Stage %1 is on a planning-only GPU (%2): move it to a real device")
                  .arg(QString::fromStdString(stage), QString::fromStdString(d->name)), true);
    return false;
  }
  DatasetEvaluationJob job;
  job.network = session_->network();
  job.run = session_->run();
  // Planned as Review plans a volume.
  job.planDevices = StageMemoryModel::inferenceDevices(*session_);
  job.windowsPerPass = StageMemoryModel::inferenceWindowsPerPass(*session_);
  try {
    job.plan = evaluate::planEvaluation(*dataset_, evaluate::caseSetFromString(cases_->currentData().toString().toStdString()),
                                        job.run.data.validationFraction, output_->text().trimmed().toStdString());
  } catch (const std::exception& e) {
    setStatus(QString::fromStdString(e.what()), true);
    return false;
  }
  // Predictions of an earlier evaluation would be replaced: asked first, when a person is there.
  int existing = 0;
  for (const auto& f : job.plan.files) existing += std::filesystem::exists(f.prediction) ? 1 : 0;
  if (existing > 0 && isVisible() &&
      QMessageBox::question(this, tr("Replace predictions?"),
                            tr("%1 already holds %n of these predictions. Replace them?", nullptr, existing).arg(output_->text())) != QMessageBox::Yes)
    return false;
  runRanks_ = 0;
  session_->clearRankProblems();
  if (session_->placement().rankCount() > 1) {
    std::string joinHint;
    const QString why = ranks_->startForSession(*session_, job.run.rankTimeoutSeconds, job.ranks, joinHint);
    if (!why.isEmpty()) {
      setStatus(why, true);
      return false;
    }
    setStatus(joinHint.empty() ? tr("Evaluating over %n rank(s)", nullptr, job.ranks.worldSize) : QString::fromStdString(joinHint), false);
    runRanks_ = job.ranks.worldSize;
  } else {
    setStatus({}, false);
  }
  plan_ = job.plan;
  last_ = {};
  // One row per case, filled as it finishes; a Dice column per label the dataset declares.
  columns_ = labels_;
  names_ = dataset_->labels;
  setUpTable(tr("waiting"));
  summary_->clear();
  running_ = true;
  session_->setBusy(true);
  progress_->setValue(0);
  progress_->setFormat(tr("starting…"));
  updateEnabled();
  worker_->prepare();
  QMetaObject::invokeMethod(worker_, [w = worker_, job] { w->run(job); }, Qt::QueuedConnection);
  return true;
}

void DatasetEvaluationDialog::onCaseStarted(int index) {
  if (index < table_->rowCount()) table_->setItem(index, table_->columnCount() - 1, item(tr("predicting…")));
}

void DatasetEvaluationDialog::setUpTable(const QString& firstStatus) {
  QStringList headers{tr("Case"), tr("Mean Dice")};
  for (const int l : columns_) {
    const auto it = names_.find(l);
    headers << tr("Dice %1").arg(it != names_.end() ? QString::fromStdString(it->second) : QString::number(l));
  }
  headers << tr("HD95 mm") << tr("Seconds") << tr("Peak memory") << tr("Status");
  table_->clear();
  table_->setColumnCount(headers.size());
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(plan_.files.size()));
  for (int r = 0; r < table_->rowCount(); ++r) {
    table_->setItem(r, 0, item(QString::fromStdString(plan_.files[r].id)));
    table_->setItem(r, headers.size() - 1, item(firstStatus));
  }
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
}

void DatasetEvaluationDialog::onCaseFinished(const DatasetCaseResult& c) {
  showCase(c.index, c.result);
  updateEnabled();
}

void DatasetEvaluationDialog::showCase(int row, const evaluate::CaseResult& r) {
  if (row >= table_->rowCount()) return;
  const int statusColumn = table_->columnCount() - 1;
  if (!r.ok()) {
    auto* s = item(tr("failed: %1").arg(QString::fromStdString(r.error)));
    s->setForeground(QColor(0xd0, 0x40, 0x40));
    s->setToolTip(Qt::convertFromPlainText(QString::fromStdString(r.error)));  // never read as rich text
    table_->setItem(row, statusColumn, s);
    return;
  }
  auto* mean = item(dice(r.meanDice));
  mean->setBackground(diceColour(r.meanDice));
  mean->setData(Qt::UserRole, r.meanDice);
  table_->setItem(row, 1, mean);
  double hd = 0;
  int finite = 0, infinite = 0;
  for (const auto& m : r.metrics) {
    if (const int col = labelColumn(m.label); col >= 0) {
      auto* d = item(dice(m.dice));
      d->setBackground(diceColour(m.dice));
      d->setToolTip(tr("label %1: %2 voxels predicted, %3 in the ground truth; %4 false positive, %5 false negative; HD95 %6 mm")
                        .arg(m.label).arg(m.predicted).arg(m.truth).arg(m.falsePositive).arg(m.falseNegative).arg(mm(m.hd95)));
      table_->setItem(row, col, d);
    }
    if (std::isfinite(m.hd95)) {
      hd += m.hd95;
      ++finite;
    } else {
      ++infinite;
    }
  }
  auto* h = item(finite > 0 ? mm(hd / finite) : mm(INFINITY));
  if (infinite > 0) h->setToolTip(tr("%n label(s) on one side only (infinite HD95) left out of the mean", nullptr, infinite));
  table_->setItem(row, statusColumn - 3, h);
  table_->setItem(row, statusColumn - 2, item(QString::number(r.seconds, r.seconds < 10 ? 'f' : 'g', r.seconds < 10 ? 2 : 3)));
  if (auto* peak = peakItem(r.peakBytes, r.plannedBytes)) table_->setItem(row, statusColumn - 1, peak);
  int removed = 0;
  for (const auto& k : r.kept) removed += static_cast<int>(std::min<std::int64_t>(k.removed, 1 << 30));
  table_->setItem(row, statusColumn, item(removed > 0 ? tr("written; %n voxel(s) outside the largest regions removed", nullptr, removed) : tr("written")));
}

void DatasetEvaluationDialog::onFinished(const DatasetEvaluationResult& r) {
  running_ = false;
  ranks_->endRun(*session_, r.error);
  session_->setBusy(false);
  // Rows never reached say so.
  for (int row = 0; row < table_->rowCount(); ++row) {
    auto* s = table_->item(row, table_->columnCount() - 1);
    if (s && (s->text() == tr("waiting") || s->text() == tr("predicting…")))
      s->setText(r.cancelled ? tr("cancelled") : tr("not predicted"));
  }
  if (r.cancelled || !r.error.isEmpty()) {
    progress_->setFormat(r.cancelled ? tr("cancelled — the predictions written so far stay, no summary") : tr("failed"));
    if (!r.error.isEmpty()) setStatus(r.error, true);
    updateEnabled();
    Q_EMIT evaluationFinished(false);
    return;
  }
  last_ = r.summary;
  progress_->setValue(1000);
  progress_->setFormat(runRanks_ > 1 ? tr("done in %1 s over %2 ranks").arg(r.seconds, 0, 'f', 1).arg(runRanks_)
                                     : tr("done in %1 s").arg(r.seconds, 0, 'f', 1));
  showSummary();
  updateEnabled();
  Q_EMIT evaluationFinished(true);
}

void DatasetEvaluationDialog::showSummary() {
  // nnU-Net's summary: per label over the cases where it is in either map; a bold last row.
  const int predicted = static_cast<int>(last_.cases.size()) - last_.failed;
  QStringList perLabel;
  const int row = table_->rowCount();
  table_->setRowCount(row + 1);
  auto* name = item(tr("mean"));
  QFont bold = name->font();
  bold.setBold(true);
  name->setFont(bold);
  table_->setItem(row, 0, name);
  for (const auto& l : last_.labels) {
    const auto it = names_.find(l.label);
    const QString label = it != names_.end() ? QString::fromStdString(it->second) : QString::number(l.label);
    QString part = tr("%1 %2 (%n case(s)", nullptr, l.cases).arg(label.toHtmlEscaped(), dice(l.meanDice));
    if (std::isfinite(l.meanHd95)) part += tr(", HD95 %1 mm").arg(mm(l.meanHd95));
    if (l.infiniteHd95 > 0) part += tr(", %n infinite", nullptr, l.infiniteHd95);
    perLabel << part + ")";
    if (const int col = labelColumn(l.label); col >= 0) {
      auto* d = item(dice(l.meanDice));
      d->setFont(bold);
      d->setBackground(diceColour(l.meanDice));
      table_->setItem(row, col, d);
    }
  }
  // HD95: the labels' means where finite, as the cases' column.
  double hd = 0;
  int finite = 0;
  for (const auto& l : last_.labels)
    if (std::isfinite(l.meanHd95)) {
      hd += l.meanHd95;
      ++finite;
    }
  if (finite > 0) {
    auto* h = item(mm(hd / finite));
    h->setFont(bold);
    table_->setItem(row, table_->columnCount() - 4, h);
  }
  auto* mean = item(last_.labels.empty() ? QString("—") : dice(last_.meanDice));
  mean->setFont(bold);
  if (!last_.labels.empty()) mean->setBackground(diceColour(last_.meanDice));
  table_->setItem(row, 1, mean);
  QString text = last_.labels.empty() ? tr("No label in any case's prediction or ground truth")
                                      : tr("Mean Dice <b>%1</b> over %n case(s)", nullptr, predicted).arg(dice(last_.meanDice));
  if (!perLabel.isEmpty()) text += " · " + perLabel.join(", ");
  // The case that needed most memory on any device: what a larger volume would be planned from.
  const evaluate::CaseResult* largest = nullptr;
  std::pair<std::string, std::int64_t> top{"", -1};
  for (const auto& c : last_.cases)
    for (const auto& [device, bytes] : c.peakBytes)
      if (bytes > top.second) {
        top = {device, bytes};
        largest = &c;
      }
  if (largest)
    text += " · " + tr("largest peak %1 on %2 (%3)")
                        .arg(QString::fromStdString(formatBytes(double(top.second))), QString::fromStdString(top.first).toHtmlEscaped(),
                             QString::fromStdString(largest->files.id).toHtmlEscaped());
  if (last_.failed > 0) text += " · <span style='color:#d04040'>" + tr("%n case(s) failed (see the table)", nullptr, last_.failed) + "</span>";
  text += "<br>" + tr("Predictions and summary.json in %1").arg(QString::fromStdString(plan_.outDir).toHtmlEscaped());
  summary_->setText(text);
}

bool DatasetEvaluationDialog::loadResults(const QString& summaryPath) {
  if (running_) return false;
  evaluate::SavedEvaluation saved;
  try {
    saved = evaluate::readEvaluation(summaryPath.toStdString());
  } catch (const std::exception& e) {
    setStatus(QString::fromStdString(e.what()), true);
    return false;
  }
  plan_ = saved.plan;
  last_ = saved.summary;
  // A Dice column per label any case has; named as the open dataset names them when it is the
  // dataset the results are of.
  std::set<int> labels;
  for (const auto& c : last_.cases)
    for (const auto& m : c.metrics) labels.insert(m.label);
  columns_.assign(labels.begin(), labels.end());
  names_.clear();
  if (dataset_ && dataset_->name == plan_.dataset) names_ = dataset_->labels;
  setUpTable(QString());
  for (std::size_t k = 0; k < last_.cases.size(); ++k) showCase(static_cast<int>(k), last_.cases[k]);
  showSummary();
  runRanks_ = 0;
  progress_->setValue(1000);
  progress_->setFormat(tr("results of %1 (%2 cases)").arg(QString::fromStdString(plan_.dataset)).arg(QString(toString(plan_.cases))));
  setStatus(tr("Opened %1").arg(summaryPath), false);
  updateEnabled();
  return true;
}

void DatasetEvaluationDialog::openRow(int row) {
  if (row < 0 || row >= static_cast<int>(plan_.files.size())) return;
  const auto& f = plan_.files[row];
  if (!QFileInfo::exists(QString::fromStdString(f.prediction))) {
    setStatus(tr("%1 has no prediction yet").arg(QString::fromStdString(f.id)), true);
    return;
  }
  Q_EMIT caseOpenRequested(QString::fromStdString(f.image), QString::fromStdString(f.label), QString::fromStdString(f.prediction));
}

} // namespace splitseg::ui
