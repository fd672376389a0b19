#include "ui/review/ReviewPanel.h"
#ifdef SPLITSEG_HAVE_EVALUATE
#include "ui/review/DatasetEvaluationDialog.h"
#endif

#include "ui/placement/StageMemoryModel.h"
#include "ui/training/RankProcesses.h"

#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"

#include "core/base/Units.h"
#include "core/planner/LargestVolume.h"
#include "core/planner/MemoryPlanner.h"

#include <QCheckBox>
#include <QColorDialog>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>
#include <sstream>
#include <cmath>

namespace splitseg::ui {

namespace {
// Error map colours: true positive, false positive, false negative.
const QColor kTp(60, 200, 90), kFp(240, 70, 70), kFn(70, 140, 255);
}

ReviewPanel::ReviewPanel(Session* session, QWidget* parent)
    : QWidget(parent), session_(session), thread_(new QThread(this)), worker_(new InferenceWorker) {
  qRegisterMetaType<InferenceResult>();
  worker_->moveToThread(thread_);
  connect(thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_->start();
  connect(worker_, &InferenceWorker::finished, this, &ReviewPanel::onFinished);
  ranks_ = new RankProcesses(this);
  connect(ranks_, &RankProcesses::rankFailed, this, [this](int rank, const QString& why) {
    session_->setRankProblem(rank, why);
    if (running_) summary_->setText(tr("%1 — inference stops within the rank timeout").arg(why));
  });
  connect(worker_, &InferenceWorker::progress, this, [this](double f, const QString& m) {
    progress_->setValue(static_cast<int>(f * 100));
    progress_->setFormat(QString("%1 — %p%").arg(m));
  });

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* form = new QFormLayout;
  mode_ = new QComboBox(this);
  mode_->addItem(tr("Sliding window"), "window");
  mode_->addItem(tr("Whole volume"), "whole");
  window_ = new QSpinBox(this);
  window_->setRange(16, 512);
  window_->setSingleStep(16);
  window_->setValue(96);
  window_->setSuffix("³");
  overlap_ = new QDoubleSpinBox(this);
  overlap_->setRange(0, 0.9);
  overlap_->setSingleStep(0.125);
  overlap_->setDecimals(3);  // as All settings: 0.375 is a common overlap
  overlap_->setValue(0.5);
  overlap_->setObjectName("reviewOverlap");
  form->addRow(tr("Inference"), mode_);
  fit_ = new QPushButton(tr("Largest that fits"), this);
  fit_->setToolTip(tr("The largest cubic window whose pass fits every device, from the memory planner"));
  connect(fit_, &QPushButton::clicked, this, &ReviewPanel::fitWindow);
  planner_ = new PlannerWorker(this);
  auto* windowRow = new QHBoxLayout;
  windowRow->addWidget(window_, 1);
  windowRow->addWidget(fit_);
  form->addRow(tr("Window"), windowRow);
  form->addRow(tr("Overlap"), overlap_);
  // nnU-Net's test-time mirroring: the mean over flipped copies, each flip doubling the passes.
  mirror_ = new QComboBox(this);
  mirror_->setObjectName("reviewMirror");
  mirror_->addItem(tr("off"), "");
  mirror_->addItem(tr("x, y, z (8 passes)"), "xyz");
  mirror_->addItem(tr("x, y (4 passes)"), "xy");
  mirror_->setToolTip(tr("Average the prediction over mirrored copies of each window (nnU-Net's test-time "
                         "augmentation): smoother labels, one pass per combination of flips"));
  form->addRow(tr("Mirroring"), mirror_);
  keepLargest_ = new QCheckBox(tr("keep each label's largest region"), this);
  keepLargest_->setObjectName("reviewKeepLargest");
#ifdef SPLITSEG_HAVE_POSTPROCESS
  keepLargest_->setToolTip(tr("After the prediction, voxels of a label outside its largest 26-connected region "
                              "become background (nnU-Net's post-processing)"));
#else
  keepLargest_->setEnabled(false);
  keepLargest_->setToolTip(tr("Needs a build with ITK"));
#endif
  form->addRow(tr("Post-processing"), keepLargest_);
  memory_ = new QLabel(this);
  memory_->setWordWrap(true);
  memory_->setObjectName("reviewMemory");
  form->addRow(tr("Memory"), memory_);
  layout->addLayout(form);
  // Every edit goes into the session's run at once (what All settings shows, sessions store and
  // Run inference runs), one undo step each (a spin box's steps merge); the memory row follows the
  // run (runChanged). syncFromSession blocks these signals, so an undo pushes nothing back.
  using Merge = RunEditCommand::Merge;
  const auto cube = [this] { return mode_->currentData().toString() == "window" ? std::int64_t(window_->value()) : 0; };
  connect(mode_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this, cube] {
    updateEnabled();
    runedit::setWindow(session_, cube());
  });
  connect(window_, qOverload<int>(&QSpinBox::valueChanged), this,
          [this, cube] { runedit::setWindow(session_, cube(), Merge::Consecutive); });
  connect(overlap_, qOverload<double>(&QDoubleSpinBox::valueChanged), this, [this](double v) { runedit::setOverlap(session_, v); });
  connect(mirror_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
    runedit::setMirror(session_, run::mirrorFromString(mirror_->currentData().toString().toStdString()));
  });
  connect(keepLargest_, &QCheckBox::toggled, this, [this](bool on) { runedit::setKeepLargest(session_, on); });
  auto* buttons = new QHBoxLayout;
  run_ = new QPushButton(tr("Run inference"), this);
  run_->setShortcut(QKeySequence(tr("Ctrl+I")));
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setEnabled(false);
  save_ = new QPushButton(tr("Save segmentation…"), this);
  connect(run_, &QPushButton::clicked, this, &ReviewPanel::runInference);
  connect(cancel_, &QPushButton::clicked, this, [this] { worker_->cancel(); });
  connect(save_, &QPushButton::clicked, this, &ReviewPanel::saveRequested);
  for (auto* b : {run_, cancel_, save_}) buttons->addWidget(b);
  layout->addLayout(buttons);
  evaluateDataset_ = new QPushButton(tr("Evaluate dataset…"), this);
  connect(evaluateDataset_, &QPushButton::clicked, this, [this] {
    if (auto* d = datasetEvaluation()) {
      d->show();
      d->raise();
      d->activateWindow();
    }
  });
  layout->addWidget(evaluateDataset_);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 100);
  progress_->setValue(0);
  progress_->setFormat(tr("no prediction yet"));
  layout->addWidget(progress_);

  auto* disp = new QFormLayout;
  display_ = new QComboBox(this);
  display_->addItem(tr("Prediction"), "prediction");
  display_->addItem(tr("Errors vs ground truth"), "errors");
  display_->addItem(tr("Ground truth"), "truth");
  connect(display_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
    publishOverlay();
    publishSurfaces();
  });
  disp->addRow(tr("Overlay"), display_);
  opacity_ = new QSlider(Qt::Horizontal, this);
  opacity_->setRange(0, 100);
  opacity_->setValue(50);
  connect(opacity_, &QSlider::valueChanged, this, [this](int v) {
    style_.opacity = v / 100.0;
    publishOverlay();
  });
  disp->addRow(tr("Opacity"), opacity_);
  surfaces_ = new QCheckBox(tr("3D surfaces"), this);
  surfaces_->setChecked(true);
  connect(surfaces_, &QCheckBox::toggled, this, &ReviewPanel::publishSurfaces);
  disp->addRow(QString(), surfaces_);
  layout->addLayout(disp);

  table_ = new QTableWidget(0, 5, this);
  table_->setHorizontalHeaderLabels({tr("Label"), tr("Show"), tr("Colour"), tr("Dice"), tr("HD95 mm")});
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  layout->addWidget(table_, 1);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  auto* legend = new QLabel(tr("Errors: <span style='color:%1'>■</span> true positive  <span style='color:%2'>■</span> false positive  "
                               "<span style='color:%3'>■</span> false negative").arg(kTp.name(), kFp.name(), kFn.name()), this);
  layout->addWidget(legend);

  connect(session_, &Session::predictionChanged, this, &ReviewPanel::evaluate);
  connect(session_, &Session::groundTruthChanged, this, &ReviewPanel::evaluate);
  connect(session_, &Session::busyChanged, this, [this](bool busy) { run_->setEnabled(!busy && !running_); });
  const auto datasetOpen = [this] {
#ifdef SPLITSEG_HAVE_EVALUATE
    const bool open = !session_->datasetFolder().isEmpty();
    evaluateDataset_->setEnabled(open);
    evaluateDataset_->setToolTip(open ? tr("Predict every case of %1 (or its validation split), write the predictions and score them "
                                           "against their ground truth: Dice and HD95 per case and label")
                                            .arg(session_->datasetFolder())
                                      : tr("Open a dataset in the Data panel first"));
#else
    evaluateDataset_->setEnabled(false);
    evaluateDataset_->setToolTip(tr("Needs a build with ITK"));
#endif
  };
  connect(session_, &Session::datasetChanged, this, datasetOpen);
  datasetOpen();
  connect(session_, &Session::runChanged, this, &ReviewPanel::syncFromSession);
  for (auto changed : {&Session::imageChanged, &Session::networkChanged, &Session::placementChanged,
                       &Session::devicesChanged, &Session::runChanged})
    connect(session_, changed, this, &ReviewPanel::updateMemoryPlan);
  syncFromSession();
  updateMemoryPlan();
}

void ReviewPanel::updateEnabled() {
  const bool w = mode_->currentData().toString() == "window";
  window_->setEnabled(w);
  fit_->setEnabled(w && !fitting_);
  overlap_->setEnabled(w);
}

void ReviewPanel::syncFromSession() {
  const run::RunSpec& r = session_->run();
  const QSignalBlocker b0(mode_), b1(window_), b2(overlap_), b3(mirror_), b4(keepLargest_);
  const auto& w = r.window;
  const bool whole = w[0] <= 0 && w[1] <= 0 && w[2] <= 0;
  mode_->setCurrentIndex(mode_->findData(whole ? "whole" : "window"));
  // The box edits cubes; a run's other window (from All settings or the CLI) is shown by its
  // largest side and stays as it is until the box is edited.
  if (!whole) window_->setValue(static_cast<int>(std::min<std::int64_t>(std::max({w[0], w[1], w[2]}), window_->maximum())));
  // Said when the box cannot show the run's window as it is (not a cube, or past the box's range).
  const bool shown = whole || (w[0] == w[1] && w[1] == w[2] && w[0] == window_->value());
  window_->setToolTip(shown ? QString() : tr("The run's window is %1×%2×%3 (x, y, z); editing this makes it a cube")
                                              .arg(w[0]).arg(w[1]).arg(w[2]));
  overlap_->setValue(r.overlap);
  const QString axes = QString::fromStdString(run::mirrorToString(r.mirror));
  int i = mirror_->findData(axes);
  if (i < 0) {  // axes the box does not offer (All settings, the CLI): shown as they are
    mirror_->addItem(tr("%1 (%2 passes)").arg(axes.split("", Qt::SkipEmptyParts).join(", ")).arg(run::mirrorPasses(r.mirror)), axes);
    i = mirror_->count() - 1;
  }
  mirror_->setCurrentIndex(i);
  keepLargest_->setChecked(r.keepLargest);
  updateEnabled();
}

std::string ReviewPanel::memoryKey() const {
  std::ostringstream key;
  key << session_->image().get() << ' ' << session_->run().toJson().dump();
  return key.str();
}

std::string ReviewPanel::fitKey() const {
  std::string key = memoryKey();
  for (const auto& d : StageMemoryModel::devices(*session_)) key += ' ' + d.name + '=' + std::to_string(d.capacity);
  return key;
}

planner::PlanRequest ReviewPanel::inferenceRequest(std::array<std::int64_t, 3>* grid) const {
  const run::RunSpec& run = session_->run();
  // The grid the network sees (the run's spacing), as the review resamples the image to it.
  const auto size = run.preprocessing.networkGrid(session_->image()->geometry()).size;  // x, y, z
  if (grid) *grid = size;
  auto request = run.inferencePlanRequest(session_->stageNames(), StageMemoryModel::inferenceDevices(*session_),
                                          {size[2], size[1], size[0]}, StageMemoryModel::inferenceWindowsPerPass(*session_));
  request.placement = session_->placement();
  return request;
}

void ReviewPanel::fitWindow() {
  const auto structure = session_->structure();
  if (!session_->image() || !structure || session_->placement().stages().empty()) return;
  planner::PlanRequest request;
  try {
    request = inferenceRequest();
  } catch (const std::exception& e) {
    memory_->setText(tr("not planned: %1").arg(QString::fromStdString(e.what())));
    return;
  }
  // The search runs on the planner's worker (seconds on a large volume); its answer is for these
  // settings: a change meanwhile (an edit, other devices) cancels it (updateMemoryPlan).
  const int id = ++fitRequest_;
  fitSearchKey_ = fitKey();
  fitting_ = true;
  fit_->setText(tr("Searching…"));
  updateEnabled();
  planner_->largestWindow(structure, std::move(request), window_->maximum(),
                          [this, id](std::optional<PlannerWorker::WindowFit> fit, const QString& error) {
    if (id != fitRequest_) return;  // cancelled, or a newer request replaced it
    endFit();
    if (fit) applyFit(*fit);
    else memory_->setText(tr("not planned: %1").arg(error));
    Q_EMIT fitWindowDone(fit && fit->largest.edge > 0);
  });
}

void ReviewPanel::endFit() {
  fitting_ = false;
  fit_->setText(tr("Largest that fits"));
  updateEnabled();
}

void ReviewPanel::applyFit(const PlannerWorker::WindowFit& fit) {
  const auto fmt = [](std::int64_t b) { return QString::fromStdString(formatBytes(static_cast<double>(b))); };
  const auto& lv = fit.largest;
  // What the size past the answer lacks on its tightest device.
  const auto shortBy = [&](const planner::MemoryPlan& p) {
    for (const auto& d : p.devices)
      if (d.name == p.limitingDevice) return tr("%1 more on %2").arg(fmt(std::max<std::int64_t>(0, -d.margin())), QString::fromStdString(d.name));
    return QString("?");
  };
  if (lv.edge == 0) {
    fittedEdge_ = 0;
    // (QString::arg reads "%1³" as %13: the superscript is a digit to it.)
    memory_->setText(tr("no window fits, not even %1: it would need %2").arg(QString::number(lv.step) + "³", shortBy(lv.next)));
    memory_->setStyleSheet("color: #d04040;");
    return;
  }
  fittedEdge_ = static_cast<int>(lv.edge);
  fitNote_ = lv.edge >= fit.volumeEdge    ? tr("the largest window there is: the volume fits in one")
             : lv.next.devices.empty() ? tr("the largest window this box takes")
                                       : tr("largest that fits; %1 would need %2").arg(QString::number(lv.edge + lv.step) + "³", shortBy(lv.next));
  runedit::setWindow(session_, lv.edge);  // one undo step; the box follows through runChanged
  fitKey_ = fitKey();
  updateMemoryPlan();
}

void ReviewPanel::updateMemoryPlan() {
  if (!measured_.empty() && memoryKey() != measuredKey_) measured_.clear();  // measured for other settings
  if (fitting_ && fitKey() != fitSearchKey_) {
    // The search is for settings no longer shown: stop it, its answer would undo this edit.
    planner_->cancelSearch();
    ++fitRequest_;
    endFit();
    Q_EMIT fitWindowDone(false);
  }
  const auto image = session_->image();
  const auto structure = session_->structure();
  memory_->setStyleSheet(QString());
  memory_->setToolTip(QString());
  if (!image || !structure || session_->placement().stages().empty()) {
    memory_->setText(tr("planned once a volume is open"));
    return;
  }
  const auto fmt = [](std::int64_t b) { return QString::fromStdString(formatBytes(static_cast<double>(b))); };
  try {
    std::array<std::int64_t, 3> grid{};
    const auto plan = planner::MemoryPlanner(*structure).plan(inferenceRequest(&grid));
    QStringList peaks;
    for (const auto& d : plan.devices)
      peaks << tr("%1 %2 of %3").arg(QString::fromStdString(d.name), fmt(d.peak), d.capacity > 0 ? fmt(d.capacity) : "?");
    const auto& w = plan.size;
    const QString pass = plan.windows > 1 ? tr("%1 windows of %2×%3×%4").arg(plan.windows).arg(w[2]).arg(w[1]).arg(w[0])
                                          : tr("one pass of %1×%2×%3").arg(w[2]).arg(w[1]).arg(w[0]);
    QString text = tr("%1 · planned peak %2").arg(pass, peaks.join(", "));
    if (!measured_.empty()) {
      // Beside the plan, what the last run with these settings measured: tensors only, so against
      // the plan's tensors (its figure above includes each device's fixed allowance).
      QStringList got;
      for (const auto& d : plan.devices)
        if (const auto it = measured_.find(d.name); it != measured_.end())
          got << tr("%1 %2 (plan %3)").arg(QString::fromStdString(d.name), fmt(it->second), fmt(d.peak - d.allowance));
      if (!got.isEmpty()) text += tr(" · measured tensors %1").arg(got.join(", "));
    }
    if (!plan.fits) {
      const auto it = std::find_if(plan.devices.begin(), plan.devices.end(),
                                   [&](const planner::DevicePlan& d) { return d.name == plan.limitingDevice; });
      text += tr(" — does not fit: %1 short by %2; try a smaller window")
                  .arg(QString::fromStdString(plan.limitingDevice), it != plan.devices.end() ? fmt(-it->margin()) : "?");
      memory_->setStyleSheet("color: #d04040;");
    }
    // The search's note while nothing it depended on has changed.
    if (fittedEdge_ > 0 && fitKey() == fitKey_) text += " · " + fitNote_;
    memory_->setText(text);
    memory_->setToolTip(tr("The memory planner's forward pass of each window batch, parameters included, plus "
                           "the review's own buffers on the host (image, sums, probabilities, labels: %1). "
                           "Resampled to the run's spacing the volume is %2×%3×%4 voxels.")
                            .arg(fmt(plan.hostBytes)).arg(grid[0]).arg(grid[1]).arg(grid[2]));
  } catch (const std::exception& e) {
    memory_->setText(tr("not planned: %1").arg(QString::fromStdString(e.what())));
  }
}

ReviewPanel::~ReviewPanel() {
  planner_->cancelSearch();  // its destructor (a child's, after this) waits for the job
  worker_->cancel();
  thread_->quit();
  thread_->wait();
}

DatasetEvaluationDialog* ReviewPanel::datasetEvaluation() {
#ifdef SPLITSEG_HAVE_EVALUATE
  if (!datasetDialog_) {
    datasetDialog_ = new DatasetEvaluationDialog(session_, this);
    connect(datasetDialog_, &DatasetEvaluationDialog::caseOpenRequested, this, &ReviewPanel::caseOpenRequested);
  }
#endif
  return datasetDialog_;
}

bool ReviewPanel::evaluateValidationCases() {
#ifdef SPLITSEG_HAVE_EVALUATE
  auto* d = datasetEvaluation();
  d->show();  // refreshes from the session's dataset and run
  d->raise();
  d->casesBox()->setCurrentIndex(d->casesBox()->findData("validation"));
  return d->evaluate();
#else
  return false;
#endif
}

bool ReviewPanel::showingErrors() const { return display_->currentData().toString() == "errors"; }

int ReviewPanel::maxLabel() const {
  int m = 0;
  for (const auto& v : {session_->prediction(), session_->groundTruth()})
    if (v) m = std::max(m, static_cast<int>(std::lround(v->range().second)));
  return m;
}

void ReviewPanel::runInference() {
  if (running_ || session_->busy()) return;
  if (!session_->image() || !session_->network()) {
    summary_->setText(tr("Open a volume first"));
    return;
  }
  std::string stage;
  if (const auto* d = session_->planningOnlyPlacement(&stage)) {
    summary_->setText(tr("Stage %1 is on a planning-only GPU (%2)").arg(QString::fromStdString(stage), QString::fromStdString(d->name)));
    return;
  }
  InferenceJob job;
  job.network = session_->network();
  // The controls edit the document's run; the job gets a copy.
  job.run = session_->run();
  runKey_ = memoryKey();
  // A placement over ranks infers over them, this process being rank 0, as training does.
  session_->clearRankProblems();
  summary_->clear();
  runRanks_ = 0;
  if (session_->placement().rankCount() > 1) {
    std::string joinHint;
    const QString why = ranks_->startForSession(*session_, job.run.rankTimeoutSeconds, job.ranks, joinHint);
    if (!why.isEmpty()) {
      summary_->setText(why);
      return;
    }
    summary_->setText(joinHint.empty() ? tr("Inference over %n rank(s)", nullptr, job.ranks.worldSize)
                                       : QString::fromStdString(joinHint));
    runRanks_ = job.ranks.worldSize;
  }
  job.image = session_->image();
  job.truth = session_->groundTruth();
  running_ = true;
  run_->setEnabled(false);
  cancel_->setEnabled(true);
  session_->setBusy(true);
  progress_->setValue(0);
  progress_->setFormat(tr("running…"));
  worker_->prepare();
  QMetaObject::invokeMethod(worker_, [w = worker_, job] { w->run(job); }, Qt::QueuedConnection);
}

void ReviewPanel::onFinished(const InferenceResult& r) {
  running_ = false;
  ranks_->endRun(*session_, r.error);
  cancel_->setEnabled(false);
  session_->setBusy(false);
  run_->setEnabled(true);
  if (!r.error.isEmpty() || r.cancelled) {
    progress_->setFormat(r.cancelled ? tr("cancelled") : tr("failed"));
    summary_->setText(r.error);
    if (!r.error.isEmpty()) Q_EMIT session_->message(r.error);
    Q_EMIT inferenceFinished(false);
    return;
  }
  progress_->setValue(100);
  QString done = runRanks_ > 1 ? tr("done in %1 s over %2 ranks").arg(r.seconds, 0, 'f', 1).arg(runRanks_)
                               : tr("done in %1 s").arg(r.seconds, 0, 'f', 1);
  if (r.removedVoxels > 0) done += tr("; %n voxel(s) outside the largest regions removed", nullptr, static_cast<int>(std::min<std::int64_t>(r.removedVoxels, INT32_MAX)));
  progress_->setFormat(done);
  pending_ = r.metrics;
  hasPending_ = !r.metrics.empty();
  measured_ = r.measured;
  measuredKey_ = runKey_;
  updateMemoryPlan();
  session_->setPrediction(r.labels);  // triggers evaluate(); metrics already computed off-thread
  Q_EMIT inferenceFinished(true);
}

void ReviewPanel::evaluate() {
  const auto pred = session_->prediction(), truth = session_->groundTruth();
  errors_.reset();
  if (pred && truth && pred->geometry().sameGrid(truth->geometry())) {
    // The worker computed them for its own result; a prediction set otherwise is measured here.
    metrics_ = hasPending_ ? pending_ : splitseg::metrics::SegmentationMetrics::compute(*pred, *truth);
    errors_ = std::make_shared<Volume>(splitseg::metrics::SegmentationMetrics::errorMap(*pred, *truth));
  } else {
    metrics_.clear();
  }
  refreshTable();
  publishOverlay();
  publishSurfaces();
  hasPending_ = false;
  // The bar says what is shown: a prediction from a run, one set otherwise (session, test), or none.
  if (!running_) {
    progress_->setValue(pred ? 100 : 0);
    if (!pred) progress_->setFormat(tr("no prediction yet"));
    else if (progress_->format() == tr("no prediction yet")) progress_->setFormat(tr("prediction shown"));
  }
}

void ReviewPanel::refreshTable() {
  const int n = maxLabel();
  while (style_.colors.size() <= n) style_.colors.push_back(LabelStyle::defaultColor(style_.colors.size()));
  while (style_.visible.size() <= n) style_.visible.push_back(true);
  table_->setRowCount(n);
  double meanDice = 0;
  for (int l = 1; l <= n; ++l) {
    const int row = l - 1;
    table_->setItem(row, 0, new QTableWidgetItem(QString::number(l)));
    auto* show = new QCheckBox(table_);
    show->setChecked(style_.isVisible(l));
    connect(show, &QCheckBox::toggled, this, [this, l](bool on) {
      style_.visible[l] = on;
      publishOverlay();
      publishSurfaces();
    });
    table_->setCellWidget(row, 1, show);
    auto* colour = new QPushButton(table_);
    colour->setStyleSheet(QString("background: %1;").arg(style_.color(l).name()));
    connect(colour, &QPushButton::clicked, this, [this, l, colour] {
      const QColor c = QColorDialog::getColor(style_.color(l), this, tr("Colour of label %1").arg(l));
      if (!c.isValid()) return;
      style_.colors[l] = c;
      colour->setStyleSheet(QString("background: %1;").arg(c.name()));
      publishOverlay();
      publishSurfaces();
    });
    table_->setCellWidget(row, 2, colour);
    const splitseg::metrics::LabelMetrics* m = nullptr;
    for (const auto& x : metrics_)
      if (x.label == l) m = &x;
    table_->setItem(row, 3, new QTableWidgetItem(m ? QString::number(m->dice, 'f', 4) : QString("—")));
    table_->setItem(row, 4, new QTableWidgetItem(m ? (std::isinf(m->hd95) ? QString("∞") : QString::number(m->hd95, 'f', 2)) : QString("—")));
    if (m) meanDice += m->dice;
  }
  if (!metrics_.empty())
    summary_->setText(tr("Mean Dice %1 over %2 label(s)").arg(meanDice / double(metrics_.size()), 0, 'f', 4).arg(metrics_.size()));
  else if (session_->prediction())
    summary_->setText(tr("Load a ground-truth label for Dice and HD95"));
}

void ReviewPanel::publishOverlay() {
  const QString what = display_->currentData().toString();
  if (what == "errors" && errors_) {
    LabelStyle s;
    s.opacity = style_.opacity;
    s.colors = {QColor(0, 0, 0), kTp, kFp, kFn};
    Q_EMIT overlayChanged(errors_, s);
  } else if (what == "truth" || !session_->prediction()) {
    Q_EMIT overlayChanged(session_->groundTruth(), style_);
  } else {
    Q_EMIT overlayChanged(session_->prediction(), style_);
  }
}

void ReviewPanel::publishSurfaces() {
  // Ground truth gets surfaces only when asked for: by default the 3D view shows the volume
  // rendering of the image (a bone label would just cover the rendered bone).
  const bool truth = display_->currentData().toString() == "truth";
  const auto labels = truth ? session_->groundTruth() : session_->prediction();
  Q_EMIT surfacesChanged(surfaces_->isChecked() ? labels : nullptr, style_);
}

} // namespace splitseg::ui
