#include "ui/training/TrainingPanel.h"
#include "ui/training/RunSettingsDialog.h"

#include "core/data/SampleSource.h"
#include "core/model/StagedNetwork.h"
#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"
#include "ui/training/DeviceTimeline.h"
#include "ui/training/NetworkOptionsDialog.h"
#include "core/engine/NetworkFactory.h"
#include "core/plugin/PluginRegistry.h"
#include "ui/training/RankProcesses.h"
#include "ui/training/StallMeter.h"
#include "ui/training/TrainingCharts.h"
#include "ui/training/TrainingWorker.h"
#include "core/data/CaseSource.h"
#include "core/volume/Intensity.h"

#ifdef SPLITSEG_HAVE_DATASET
#include "core/dataset/DatasetSource.h"
#endif

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QStandardPaths>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <QScrollArea>
#include <QVBoxLayout>

#include <numeric>

namespace splitseg::ui {

namespace {
// Where a run's checkpoint goes unless the run names one: the user's data folder, one file per run.
std::string defaultCheckpointPath() {
  const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/checkpoints";
  QDir().mkpath(dir);
  return (dir + "/run-" + QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss") + ".pt").toStdString();
}

QSpinBox* spin(QWidget* parent, int lo, int hi, int value, int step = 1) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  s->setSingleStep(step);
  return s;
}

QString duration(double s) {
  if (s < 60) return QObject::tr("%1 s").arg(int(s));
  if (s < 3600) return QObject::tr("%1 min %2 s").arg(int(s) / 60).arg(int(s) % 60);
  return QObject::tr("%1 h %2 min").arg(int(s) / 3600).arg((int(s) % 3600) / 60);
}
} // namespace

TrainingPanel::TrainingPanel(Session* session, QWidget* parent)
    : QWidget(parent), session_(session), thread_(new QThread(this)), worker_(new TrainingWorker),
      stall_(new StallMeter(this)) {
  qRegisterMetaType<engine::StepMetrics>();
  qRegisterMetaType<engine::ValidationMetrics>();
  worker_->moveToThread(thread_);
  ranks_ = new RankProcesses(this);
  connect(ranks_, &RankProcesses::rankFailed, this, [this](int rank, const QString& why) {
    session_->setRankProblem(rank, why);
    if (running_) status_->setText(tr("%1 — the run stops within the rank timeout").arg(why));
  });
  thread_->setObjectName("training");
  connect(thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_->start();
  connect(worker_, &TrainingWorker::started, this, &TrainingPanel::onStarted);
  connect(worker_, &TrainingWorker::step, this, &TrainingPanel::onStep);
  connect(worker_, &TrainingWorker::planned, this, [this](const QVariantMap& plan) {
    for (auto it = plan.begin(); it != plan.end(); ++it) charts_->setPlanned(it.key(), it.value().toLongLong());
  });
  connect(worker_, &TrainingWorker::validated, this, &TrainingPanel::onValidation);
  connect(worker_, &TrainingWorker::finished, this, &TrainingPanel::onFinished);
  connect(worker_, &TrainingWorker::message, this, [this](const QString& t) { status_->setText(t); });

  // The form, charts and timeline scroll inside the panel: their natural height (~1100 px) is
  // more than a 900-pixel window has, and the window's minimum would otherwise follow it.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName("trainingScroll");
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  outer->addWidget(scroll);
  auto* content = new QWidget(scroll);
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(8);
  data_ = new QComboBox(this);
  data_->addItem(tr("Open volume + label"), "volume");
  data_->addItem(tr("Synthetic phantoms"), "phantom");
#ifdef SPLITSEG_HAVE_DATASET
  data_->addItem(tr("Open dataset (all cases)"), "dataset");
#endif
  arch_ = new QComboBox(this);
  arch_->setObjectName("architecture");
  for (const auto& a : plugin::PluginRegistry::instance().architectures()) {
    arch_->addItem(QString::fromStdString(a.name), QString::fromStdString(a.name));
    arch_->setItemData(arch_->count() - 1,
                       QString::fromStdString(a.description + " (" + a.source + ")"), Qt::ToolTipRole);
  }
  options_ = new QPushButton(tr("Options…"), this);
  options_->setObjectName("networkOptions");
  options_->setToolTip(tr("Every option of this architecture (the registry's defaults, the network's current values)"));
  connect(options_, &QPushButton::clicked, this, &TrainingPanel::editNetworkOptions);
  base_ = spin(this, 2, 64, 32, 2);
  depth_ = spin(this, 2, 6, 5);
  applyNet_ = new QPushButton(tr("Apply"), this);
  applyNet_->setObjectName("applyNetwork");
  applyNet_->setToolTip(tr("Rebuild the network with these sizes (new weights; placement kept where stages still exist)"));
  connect(applyNet_, &QPushButton::clicked, this, &TrainingPanel::applyNetwork);
  patch_ = spin(this, 8, 512, 64, 8);
  patch_->setSuffix("³");
  batch_ = spin(this, 1, 16, 2);
  steps_ = spin(this, 1, 1000000, 200, 10);
  epochs_ = spin(this, 0, 10000, 0);
  epochs_->setSpecialValueText(tr("— (steps)"));
  epochs_->setToolTip(tr("Epochs of 50 steps; 0 uses the step count"));
  validate_ = spin(this, 0, 100000, 10);
  validate_->setSpecialValueText(tr("never"));
  budget_ = spin(this, 0, 1 << 20, 0, 64);
  budget_->setSuffix(tr(" MiB"));
  budget_->setSpecialValueText(tr("none"));
  budget_->setToolTip(tr("CPU memory budget of every process: the weights, Adam's moments and a step's tensors, or a prediction's; beyond it a step or a prediction fails as out of memory (what-if). Plans take it as the CPU's capacity"));
  lr_ = new QDoubleSpinBox(this);
  lr_->setDecimals(5);
  lr_->setRange(1e-5, 1.0);
  lr_->setSingleStep(1e-4);
  lr_->setValue(1e-3);
  precision_ = new QComboBox(this);
  precision_->addItems({"fp32", "bf16"});
  connect(precision_, &QComboBox::currentTextChanged, this, [this](const QString& p) {
    // Every stage; the placement view's cards set single ones.
    runedit::setAllPrecision(session_, placement::precisionFromString(p.toStdString()));
  });
  intensity_ = new QComboBox(this);
  for (const auto& name : intensityPresetNames()) intensity_->addItem(QString::fromStdString(name));
  intensity_->setToolTip(tr("Intensity normalisation of the run: used for training, review and export alike"));
  connect(intensity_, &QComboBox::currentTextChanged, this,
          [this](const QString& name) { runedit::setIntensity(session_, name.toStdString()); });
  // Every edit goes into the document's run at once, one undo step each (a spin box's steps
  // merge): the placement view shows the same patch and batch, and a saved session holds what is
  // on screen. syncFromSession blocks the controls' signals, so an undo pushes nothing back.
  connect(patch_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int edge) { runedit::setPatch(session_, edge); });
  connect(batch_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int batch) { runedit::setBatch(session_, batch); });
  connect(steps_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int steps) { runedit::setSteps(session_, steps); });
  using Merge = RunEditCommand::Merge;
  const auto edit = [this](const char* key, auto field, auto value, const QString& text) {
    runedit::edit(session_, RunField::member(key, field), [field, value](run::RunSpec& r) { r.*field = value; }, text,
                  Merge::Consecutive);
  };
  connect(epochs_, qOverload<int>(&QSpinBox::valueChanged), this,
          [edit](int n) { edit("epochs", &run::RunSpec::epochs, n, tr("set epochs to %1").arg(n)); });
  connect(validate_, qOverload<int>(&QSpinBox::valueChanged), this, [edit](int n) {
    edit("validateEvery", &run::RunSpec::validateEvery, std::int64_t(n), tr("validate every %1 steps").arg(n));
  });
  connect(budget_, qOverload<int>(&QSpinBox::valueChanged), this, [edit](int mib) {
    edit("cpuBudget", &run::RunSpec::cpuBudgetBytes, std::int64_t(mib) * 1024 * 1024, tr("set CPU budget to %1 MiB").arg(mib));
  });
  connect(lr_, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
          [edit](double lr) { edit("learningRate", &run::RunSpec::learningRate, lr, tr("set learning rate to %1").arg(lr)); });
  connect(data_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
    const QString kind = data_->currentData().toString();
    const auto k = kind == "volume" ? run::DataKind::Volume : kind == "dataset" ? run::DataKind::Dataset : run::DataKind::Synthetic;
    runedit::edit(session_, {"data", [](const run::RunSpec& from, run::RunSpec& to) { to.data.kind = from.data.kind; },
                             [](const run::RunSpec& a, const run::RunSpec& b) { return a.data.kind == b.data.kind; }},
                  [k](run::RunSpec& r) { r.data.kind = k; }, tr("train on %1").arg(data_->currentText()));
  });
  int r = 0;
  auto row = [&](const QString& l1, QWidget* w1, const QString& l2, QWidget* w2) {
    grid->addWidget(new QLabel(l1, this), r, 0);
    grid->addWidget(w1, r, 1);
    grid->addWidget(new QLabel(l2, this), r, 2);
    grid->addWidget(w2, r, 3);
    ++r;
  };
  grid->addWidget(new QLabel(tr("Data"), this), r, 0);
  grid->addWidget(data_, r++, 1, 1, 3);
  evaluateAfter_ = new QCheckBox(tr("then evaluate the validation cases"), this);
  evaluateAfter_->setObjectName("evaluateAfterwards");
  const auto datasetChosen = [this] {
    const bool dataset = data_->currentData().toString() == "dataset";
    evaluateAfter_->setEnabled(dataset);
    evaluateAfter_->setToolTip(dataset ? tr("When training ends, predict every case it held out for validation, write the "
                                            "predictions and score them (Review > Evaluate dataset)")
                                       : tr("Train on an open dataset to evaluate its validation cases afterwards"));
  };
  connect(data_, qOverload<int>(&QComboBox::currentIndexChanged), this, datasetChosen);
  datasetChosen();
  grid->addWidget(evaluateAfter_, r++, 1, 1, 3);
  auto* arch = new QHBoxLayout;
  arch->addWidget(arch_, 1);
  arch->addWidget(options_);
  grid->addWidget(new QLabel(tr("Network"), this), r, 0);
  grid->addLayout(arch, r++, 1, 1, 3);
  auto* net = new QHBoxLayout;
  net->addWidget(base_);
  net->addWidget(new QLabel(tr("depth"), this));
  net->addWidget(depth_);
  net->addWidget(applyNet_);
  grid->addWidget(new QLabel(tr("Base ch."), this), r, 0);
  grid->addLayout(net, r++, 1, 1, 3);
  row(tr("Patch"), patch_, tr("Batch"), batch_);
  row(tr("Steps"), steps_, tr("Epochs"), epochs_);
  row(tr("LR"), lr_, tr("Precision"), precision_);
  row(tr("Validate every"), validate_, tr("CPU budget"), budget_);
  grid->addWidget(new QLabel(tr("Intensity"), this), r, 0);
  grid->addWidget(intensity_, r++, 1, 1, 3);
  layout->addLayout(grid);

  auto* buttons = new QHBoxLayout;
  start_ = new QPushButton(tr("Start"), this);
  pause_ = new QPushButton(tr("Pause"), this);
  stop_ = new QPushButton(tr("Stop"), this);
  start_->setShortcut(QKeySequence(tr("Ctrl+T")));
  connect(start_, &QPushButton::clicked, this, &TrainingPanel::startRun);
  connect(pause_, &QPushButton::clicked, this, &TrainingPanel::togglePause);
  connect(stop_, &QPushButton::clicked, this, &TrainingPanel::stopRun);
  for (auto* b : {start_, pause_, stop_}) buttons->addWidget(b);
  // Every field of the run in one form (the controls above are the common ones).
  auto* all = new QPushButton(tr("All settings…"), this);
  all->setObjectName("allRunSettings");
  all->setShortcut(QKeySequence(tr("Ctrl+,")));
  all->setToolTip(tr("The whole run description: placement, memory, schedule, data, inference (Ctrl+,)"));
  connect(all, &QPushButton::clicked, this, [this] {
    RunSettingsDialog dialog(session_, this);
    dialog.exec();
  });
  connect(session_, &Session::busyChanged, all, [all](bool busy) { all->setEnabled(!busy); });
  buttons->addWidget(all);
  layout->addLayout(buttons);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setFormat(tr("idle"));
  layout->addWidget(progress_);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  error_ = new QLabel(this);
  error_->setWordWrap(true);
  error_->setStyleSheet("color: #ff6b6b;");
  error_->hide();
  stallLabel_ = new QLabel(this);
  stallLabel_->setStyleSheet("color: #9aa4b2; font-size: 11px;");
  // Text that changes every step must not change the panel's size hint: a wider dock would
  // shrink the 3D view and force a (slow, software-GL) re-render on the UI thread.
  for (auto* l : {status_, error_, stallLabel_}) l->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(status_);
  layout->addWidget(error_);
  layout->addWidget(stallLabel_);
  charts_ = new TrainingCharts(this);
  layout->addWidget(charts_, 1);
  timeline_ = new DeviceTimeline(this);
  timeline_->setToolTip(tr("Where each device's time went in the last steps (wheel or +/- zooms, drag pans, 0 resets)"));
  layout->addWidget(timeline_);
  scroll->setWidget(content);  // after its layout is complete (QScrollArea::setWidget)

  connect(session_, &Session::networkChanged, this, &TrainingPanel::syncFromSession);
  connect(session_, &Session::runChanged, this, &TrainingPanel::syncFromSession);
  syncFromSession();
  setRunning(false);
}

TrainingPanel::~TrainingPanel() {
  // A run still going must end before its thread and the network go away.
  worker_->stop();
  worker_->resume();
  thread_->quit();
  thread_->wait();
}

double TrainingPanel::lastStallMs() const { return stall_->longestStallMs(); }
double TrainingPanel::lastStallP99Ms() const { return stall_->percentileStallMs(99); }

void TrainingPanel::syncFromSession() {
  const auto& r = session_->run();
  const QSignalBlocker b0(precision_), b1(patch_), b2(batch_), b3(steps_), b4(epochs_), b5(validate_), b6(budget_),
      b7(lr_), b8(intensity_), b9(data_);
  precision_->setCurrentText(QString::fromStdString(placement::toString(r.precision.fallback)));
  patch_->setValue(static_cast<int>(r.patch[0]));
  batch_->setValue(r.batch);
  steps_->setValue(static_cast<int>(std::min<std::int64_t>(r.steps, steps_->maximum())));
  epochs_->setValue(r.epochs);
  validate_->setValue(static_cast<int>(std::min<std::int64_t>(r.validateEvery, validate_->maximum())));
  budget_->setValue(static_cast<int>(r.cpuBudgetBytes / (1024 * 1024)));
  lr_->setValue(r.learningRate);
  if (!r.preprocessing.intensity.preset.empty())
    intensity_->setCurrentText(QString::fromStdString(r.preprocessing.intensity.preset));
  const char* kind = r.data.kind == run::DataKind::Dataset ? "dataset"
                     : r.data.kind == run::DataKind::Synthetic ? "phantom" : "volume";
  if (const int i = data_->findData(kind); i >= 0) data_->setCurrentIndex(i);
  if (auto net = session_->network()) {
    const QSignalBlocker c1(base_), c2(depth_), c3(arch_);
    if (const int i = arch_->findData(QString::fromStdString(r.architecture)); i >= 0) arch_->setCurrentIndex(i);
    int depth = 0;
    for (const auto& st : session_->stages()) depth = std::max(depth, st.level + 1);
    depth_->setValue(depth);
    if (!session_->stages().isEmpty()) base_->setValue(static_cast<int>(session_->stages().front().outChannels));
  }
}

nlohmann::json TrainingPanel::chosenOptions() const {
  // The network's own options when it is of the chosen architecture, else that one's defaults;
  // base channels and depth from their boxes where the architecture has them.
  const std::string arch = arch_->currentData().toString().toStdString();
  nlohmann::json options = session_->run().architecture == arch && session_->network()
                               ? session_->run().networkOptions
                               : nlohmann::json::parse(plugin::PluginRegistry::instance().info(arch).defaultOptionsJson);
  if (options.contains("base_channels")) options["base_channels"] = base_->value();
  if (options.contains("depth")) options["depth"] = depth_->value();
  return options;
}

void TrainingPanel::rebuildNetwork(const nlohmann::json& options) {
  const std::string arch = arch_->currentData().toString().toStdString();
  try {
    session_->createNetwork(arch, options);
    showError({});
    status_->setText(tr("Network rebuilt: %1 %2").arg(QString::fromStdString(arch), QString::fromStdString(options.dump())));
  } catch (const std::exception& e) {
    showError(tr("Network not rebuilt: %1").arg(e.what()));
  }
}

void TrainingPanel::applyNetwork() {
  if (running_) return;
  rebuildNetwork(chosenOptions());
}

void TrainingPanel::editNetworkOptions() {
  if (running_) return;
  const std::string arch = arch_->currentData().toString().toStdString();
  const auto defaults = nlohmann::json::parse(plugin::PluginRegistry::instance().info(arch).defaultOptionsJson);
  // The check builds the network; the accepted one becomes the session's (not built twice).
  std::shared_ptr<model::StagedNetwork> built;
  NetworkOptionsDialog dialog(arch, defaults, chosenOptions(), [arch, &built](const nlohmann::json& o) -> std::string {
    try {
      built = engine::createNetwork(arch, o.dump());
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  }, this);
  optionsDialog_ = &dialog;
  const bool ok = dialog.exec() == QDialog::Accepted;
  optionsDialog_ = nullptr;
  if (!ok || !built) return;
  session_->setNetwork(built);
  showError({});
  status_->setText(tr("Network rebuilt: %1 %2").arg(QString::fromStdString(arch), QString::fromStdString(dialog.options().dump())));
}

void TrainingPanel::setRunning(bool running) {
  running_ = running;
  start_->setEnabled(!running);
  pause_->setEnabled(running);
  stop_->setEnabled(running);
  applyNet_->setEnabled(!running);
  options_->setEnabled(!running);
  arch_->setEnabled(!running);
  pause_->setText(tr("Pause"));
}

void TrainingPanel::showError(const QString& text) {
  lastError_ = text;
  error_->setText(text);
  error_->setVisible(!text.isEmpty());
  if (!text.isEmpty()) Q_EMIT session_->message(text);
}

void TrainingPanel::startRun() {
  if (running_) return;
  showError({});
  auto net = session_->network();
  if (!net) return showError(tr("No network"));
  // Planning-only devices are for what-if questions; the engine cannot run on them.
  std::string stage;
  if (const auto* d = session_->planningOnlyPlacement(&stage))
    return showError(tr("Stage %1 is on %2, a planning-only GPU: move it to a real device to train")
                         .arg(QString::fromStdString(stage), QString::fromStdString(d->name)));
  TrainingJob c;
  c.network = net;
  // The worker gets a copy of the document's run, completed with what this run reads and writes.
  run::RunSpec run = session_->run();
  run.setPlacement(session_->placement());
  const bool binary = net->outChannels() == 1;
  const QString dataKind = data_->currentData().toString();
#ifdef SPLITSEG_HAVE_DATASET
  if (dataKind == "dataset" && !session_->datasetFolder().isEmpty()) {
    run.data.kind = run::DataKind::Dataset;
    run.data.dataset = session_->datasetFolder().toStdString();
    dataset::DatasetSourceOptions so;
    so.preprocessing = run.preprocessing;
    so.validationFraction = run.data.validationFraction;
    const std::string folder = run.data.dataset;
    c.makeSource = [folder, so] { return std::make_shared<dataset::DatasetSource>(dataset::openDataset(folder), so); };
  } else
#endif
  if (dataKind == "volume" && session_->image() && session_->groundTruth()) {
    run.data.kind = run::DataKind::Volume;
    run.data.image = session_->imageSource().toStdString();
    run.data.label = session_->groundTruthSource().toStdString();
    try {
      c.source = std::make_shared<data::CaseSource>(*session_->image(), *session_->groundTruth(), run.preprocessing, binary);
    } catch (const std::exception& e) {
      return showError(QString::fromStdString(e.what()));
    }
  } else {
    if (dataKind != "phantom")
      status_->setText(tr("No %1 open: training on synthetic phantoms").arg(dataKind == "dataset" ? tr("dataset") : tr("labelled volume")));
    run.data = {};
    run.data.kind = run::DataKind::Synthetic;
    c.source = std::make_shared<data::PhantomSource>(binary ? 1 : static_cast<int>(net->outChannels() - 1));
  }
  // The U-Net halves the size depth-1 times: round the patch up to a multiple of that.
  const auto div = net->sizeDivisor();
  for (auto& p : run.patch) p = (p + div - 1) / div * div;
  if (run.checkpoint.empty()) run.checkpoint = defaultCheckpointPath();
  lastRunPrecision_ = run.precision.toString(session_->stageNames());
  session_->setRun(run);  // the document shows what runs (data, rounded patch, checkpoint)
  c.run = session_->run();
  c.run.timeline = true;  // the device timeline below the charts (the document's run keeps its own choice)
  if (!prepareRanks(c)) return;
  charts_->reset();
  timeline_->reset();
  recentSeconds_.clear();
  total_ = c.run.totalSteps();
  progress_->setRange(0, static_cast<int>(total_));
  progress_->setValue(0);
  progress_->setFormat(tr("starting…"));
  setRunning(true);
  session_->setBusy(true);
  stall_->start();
  Q_EMIT runStarted();
  worker_->prepare();
  QMetaObject::invokeMethod(worker_, [w = worker_, c] { w->run(c); }, Qt::QueuedConnection);
}

bool TrainingPanel::prepareRanks(TrainingJob& c) {
  session_->clearRankProblems();
  if (session_->placement().rankCount() <= 1) return true;
  const QString why = ranks_->startForSession(*session_, c.run.rankTimeoutSeconds, c.ranks, c.joinHint);
  if (!why.isEmpty()) showError(why);
  return why.isEmpty();
}

void TrainingPanel::togglePause() {
  if (!running_) return;
  if (worker_->paused()) {
    worker_->resume();
    pause_->setText(tr("Pause"));
    progress_->setFormat(tr("%v / %m steps"));
  } else {
    worker_->pause();
    pause_->setText(tr("Resume"));
    progress_->setFormat(tr("paused at %v / %m"));
  }
}

void TrainingPanel::stopRun() {
  if (!running_) return;
  worker_->stop();
  worker_->resume();  // a paused run must wake up to see the stop
  progress_->setFormat(tr("stopping…"));
}

void TrainingPanel::onStarted(qint64 total) {
  total_ = total;
  progress_->setRange(0, static_cast<int>(total));
}

void TrainingPanel::onStep(const engine::StepMetrics& m) {
  charts_->addStep(m);
  timeline_->addStep(m.step, m.seconds, m.timeline);
  recentSeconds_.push_back(m.seconds);
  if (recentSeconds_.size() > 20) recentSeconds_.pop_front();
  const double mean = std::accumulate(recentSeconds_.begin(), recentSeconds_.end(), 0.0) / recentSeconds_.size();
  progress_->setValue(static_cast<int>(m.step));
  if (!worker_->paused())
    progress_->setFormat(tr("%v / %m steps — ETA %1").arg(duration(mean * double(m.totalSteps - m.step))));
  status_->setText(tr("step %1: loss %2, Dice %3, rate %4, %5 s/step").arg(m.step).arg(m.loss, 0, 'f', 4)
                       .arg(m.meanDice, 0, 'f', 3).arg(m.learningRate, 0, 'g', 3).arg(m.seconds, 0, 'f', 2));
  Q_EMIT stepDone(m.step, m.totalSteps);
}

void TrainingPanel::onValidation(const engine::ValidationMetrics& m) {
  if (m.cases == 0) {
    // Nothing to validate on: no point at 0 in the chart, a line saying why instead.
    status_->setText(tr("step %1: no validation cases in this data (validation skipped)").arg(m.step));
    return;
  }
  charts_->addValidation(m);
}

bool TrainingPanel::evaluatesAfterwards() const {
  return evaluateAfter_->isChecked() && data_->currentData().toString() == "dataset" && !session_->datasetFolder().isEmpty();
}

void TrainingPanel::onFinished(bool stopped, const QString& error) {
  stall_->stop();
  ranks_->endRun(*session_, error);
  charts_->flush();
  setRunning(false);
  session_->setBusy(false);
  progress_->setFormat(error.isEmpty() ? (stopped ? tr("stopped at %v / %m") : tr("done: %v / %m steps")) : tr("failed at %v / %m"));
  stallLabel_->setText(tr("UI-thread stall during the run: longest %1 ms, 99th percentile %2 ms")
                           .arg(stall_->longestStallMs(), 0, 'f', 1)
                           .arg(stall_->percentileStallMs(99), 0, 'f', 1));
  if (!error.isEmpty()) showError(error);
  // The weights changed: review and the placement view see the same network object.
  Q_EMIT runFinished(stopped, error);
}

} // namespace splitseg::ui
