#include "ui/training/RunSettingsDialog.h"
#include "core/base/JsonText.h"
#include "core/base/Units.h"
#include "core/placement/Placement.h"
#include "core/placement/ShardLayout.h"
#include "core/plugin/PluginRegistry.h"
#include "core/run/RunSpec.h"
#include "core/volume/Intensity.h"
#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <limits>

namespace splitseg::ui {

namespace {
QString joined(const std::set<std::string>& items) {
  QStringList out;
  for (const auto& s : items) out << QString::fromStdString(s);
  return out.join(',');
}

QSpinBox* spin(QWidget* parent, int lo, int hi, const QString& special = {}) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  if (!special.isEmpty()) s->setSpecialValueText(special);
  return s;
}

QWidget* triple(QWidget* parent, QWidget* a, QWidget* b, QWidget* c) {
  auto* w = new QWidget(parent);
  auto* l = new QHBoxLayout(w);
  l->setContentsMargins(0, 0, 0, 0);
  for (auto* x : {a, b, c}) l->addWidget(x);
  return w;
}
} // namespace

RunSettingsDialog::RunSettingsDialog(Session* session, QWidget* parent) : QDialog(parent), session_(session) {
  setWindowTitle(tr("Run settings"));
  setObjectName("runSettings");
  auto* layout = new QVBoxLayout(this);
  auto* columns = new QGridLayout;
  layout->addLayout(columns);
  auto group = [this](const QString& title) {
    auto* g = new QGroupBox(title, this);
    auto* f = new QFormLayout(g);
    f->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    return std::make_pair(g, f);
  };

  auto [net, netForm] = group(tr("Network"));
  arch_ = new QComboBox(this);
  for (const auto& a : plugin::PluginRegistry::instance().architectures())
    arch_->addItem(QString::fromStdString(a.name));
  options_ = new QLineEdit(this);
  options_->setObjectName("networkOptions");
  options_->setToolTip(tr("The architecture's options as JSON, e.g. {\"base_channels\":16,\"depth\":4}"));
  netForm->addRow(tr("Architecture"), arch_);
  netForm->addRow(tr("Options (JSON)"), options_);

  auto [mem, memForm] = group(tr("Placement and memory"));
  placement_ = new QLineEdit(this);
  placement_->setObjectName("placementText");
  placement_->setToolTip(tr("stage=device pairs: enc0=cuda:0,dec0=cuda:0+cuda:1 (sharded), dec1=r1:cuda:0 (a rank)"));
  precision_ = new QLineEdit(this);
  precision_->setObjectName("precisionText");
  precision_->setToolTip(tr("fp32, bf16, or P:stages for those stages (bf16:enc0,dec0)"));
  recompute_ = new QLineEdit(this);
  recompute_->setObjectName("recomputeText");
  recompute_->setToolTip(tr("Activation checkpointing: all, none or a stage list (enc0,dec0)"));
  offload_ = new QCheckBox(tr("recomputed stages' saved inputs in pinned host memory"), this);
  offload_->setObjectName("offloadBox");
  cpuLayout_ = new QComboBox(this);
  cpuLayout_->setObjectName("cpuLayoutBox");
  for (auto l : {planner::CpuLayout::Auto, planner::CpuLayout::Ncdhw, planner::CpuLayout::ChannelsLast})
    cpuLayout_->addItem(QString::fromStdString(planner::toString(l)));
  cpuLayout_->setToolTip(tr("Weights of the fp32 CPU stages while training. auto: %1 on this CPU")
                             .arg(planner::usesChannelsLast(planner::CpuLayout::Auto)
                                      ? tr("channels-last (no AVX-512; faster here, measured)")
                                      : tr("NCDHW (AVX-512)")));
  shardAxis_ = new QComboBox(this);
  for (auto a : {placement::ShardAxis::Depth, placement::ShardAxis::Height, placement::ShardAxis::Width})
    shardAxis_->addItem(QString::fromStdString(placement::toString(a)));
  micro_ = spin(this, 1, 4096);
  micro_->setToolTip(tr("Ranks: the batch as this many parts. Stages split over ranks run them as a pipeline "
                        "(GPipe); every stage sharded over the ranks runs them one after another, holding "
                        "one part's activations at a time. The same gradients either way. Review over "
                        "pipelined ranks runs this many windows a pass, one per part, the ranks working on "
                        "different windows at once."));
  rankTimeout_ = spin(this, 1, 86400);
  rankTimeout_->setSuffix(tr(" s"));
  timeline_ = new QCheckBox(tr("record every device's spans per step"), this);
  memForm->addRow(tr("Placement"), placement_);
  memForm->addRow(tr("Precision"), precision_);
  memForm->addRow(tr("Recompute"), recompute_);
  memForm->addRow(tr("Host offload"), offload_);
  memForm->addRow(tr("CPU layout"), cpuLayout_);
  memForm->addRow(tr("Shard axis"), shardAxis_);
  memForm->addRow(tr("Micro-batches"), micro_);
  memForm->addRow(tr("Rank timeout"), rankTimeout_);
  memForm->addRow(tr("Timeline"), timeline_);

  auto [sched, schedForm] = group(tr("Schedule"));
  for (auto*& p : patch_) p = spin(this, 1, 4096);
  batch_ = spin(this, 1, 4096);
  steps_ = spin(this, 1, std::numeric_limits<int>::max());
  epochs_ = spin(this, 0, 100000, tr("— (steps)"));
  stepsPerEpoch_ = spin(this, 1, 1000000);
  validateEvery_ = spin(this, 0, std::numeric_limits<int>::max(), tr("never"));
  checkpointEvery_ = spin(this, 0, std::numeric_limits<int>::max(), tr("at the end"));
  lr_ = new QDoubleSpinBox(this);
  lr_->setDecimals(6);
  lr_->setRange(0.000001, 10);
  lr_->setSingleStep(0.0001);
  lrSchedule_ = new QComboBox(this);
  lrSchedule_->setObjectName("lrSchedule");
  lrSchedule_->addItem(tr("constant"), "constant");
  lrSchedule_->addItem(tr("poly (nnU-Net: (1 − t/T)^0.9, to 0)"), "poly");
  lrSchedule_->addItem(tr("cosine (to 0)"), "cosine");
  seed_ = new QLineEdit(this);
  seed_->setObjectName("seedText");
  cpuBudget_ = new QLineEdit(this);
  cpuBudget_->setObjectName("cpuBudgetText");
  cpuBudget_->setToolTip(tr("none, or a size such as 8GiB"));
  schedForm->addRow(tr("Patch x, y, z"), triple(this, patch_[0], patch_[1], patch_[2]));
  schedForm->addRow(tr("Batch"), batch_);
  schedForm->addRow(tr("Steps"), steps_);
  schedForm->addRow(tr("Epochs"), epochs_);
  schedForm->addRow(tr("Steps per epoch"), stepsPerEpoch_);
  schedForm->addRow(tr("Validate every"), validateEvery_);
  schedForm->addRow(tr("Checkpoint every"), checkpointEvery_);
  schedForm->addRow(tr("Learning rate"), lr_);
  schedForm->addRow(tr("Rate over the run"), lrSchedule_);
  schedForm->addRow(tr("Seed"), seed_);
  schedForm->addRow(tr("CPU budget"), cpuBudget_);

  auto [data, dataForm] = group(tr("Data, preprocessing, inference"));
  intensity_ = new QComboBox(this);
  for (const auto& n : intensityPresetNames()) intensity_->addItem(QString::fromStdString(n));
  for (auto*& s : spacing_) {
    s = new QDoubleSpinBox(this);
    s->setRange(0, 100);
    s->setDecimals(3);
    s->setSpecialValueText(tr("source"));
  }
  checkpoint_ = new QLineEdit(this);
  checkpoint_->setPlaceholderText(tr("the user's data folder, one file per run"));
  for (auto*& w : window_) w = spin(this, 0, 4096, tr("whole"));
  overlap_ = new QDoubleSpinBox(this);
  overlap_->setRange(0, 0.95);
  overlap_->setSingleStep(0.125);
  overlap_->setDecimals(3);
  dataForm->addRow(tr("Intensity"), intensity_);
  dataForm->addRow(tr("Spacing (mm)"), triple(this, spacing_[0], spacing_[1], spacing_[2]));
  dataForm->addRow(tr("Checkpoint"), checkpoint_);
  dataForm->addRow(tr("Window x, y, z"), triple(this, window_[0], window_[1], window_[2]));
  dataForm->addRow(tr("Window overlap"), overlap_);
  for (int i = 0; i < 3; ++i) {
    mirror_[i] = new QCheckBox(QString("xyz"[i]), this);
    mirror_[i]->setObjectName(QString("mirror") + "xyz"[i]);
    mirror_[i]->setToolTip(tr("Test-time mirroring: each axis ticked doubles the passes (nnU-Net: all three)"));
  }
  dataForm->addRow(tr("Mirror along"), triple(this, mirror_[0], mirror_[1], mirror_[2]));
  keepLargest_ = new QCheckBox(tr("keep each label's largest region after inference"), this);
  keepLargest_->setObjectName("keepLargest");
  dataForm->addRow(tr("Post-processing"), keepLargest_);

  columns->addWidget(net, 0, 0);
  columns->addWidget(mem, 1, 0);
  columns->addWidget(sched, 0, 1, 2, 1);
  columns->addWidget(data, 2, 0, 1, 2);

  problemsLabel_ = new QLabel(this);
  problemsLabel_->setObjectName("runProblems");
  problemsLabel_->setWordWrap(true);
  problemsLabel_->setStyleSheet("color: #ff6b6b");
  problemsLabel_->hide();
  layout->addWidget(problemsLabel_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Apply | QDialogButtonBox::Cancel, this);
  layout->addWidget(buttons);
  connect(buttons->button(QDialogButtonBox::Apply), &QPushButton::clicked, this, [this] { apply(); });
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    if (apply()) accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  load(session_->run());
}

void RunSettingsDialog::load(const run::RunSpec& r) {
  arch_->setCurrentText(QString::fromStdString(r.architecture));
  options_->setText(QString::fromStdString(r.networkOptions.dump()));
  QStringList pairs;
  for (const auto& [stage, entry] : r.placement) pairs << QString::fromStdString(stage + "=" + entry);
  placement_->setText(pairs.join(','));
  precision_->setText(QString::fromStdString(r.precision.toString(session_->stageNames())));
  recompute_->setText(r.recompute.empty() ? QString("none") : joined(r.recompute));
  offload_->setChecked(r.offload);
  cpuLayout_->setCurrentText(QString::fromStdString(planner::toString(r.cpuLayout)));
  shardAxis_->setCurrentText(QString::fromStdString(placement::toString(r.shardAxis)));
  micro_->setValue(r.microBatches);
  rankTimeout_->setValue(r.rankTimeoutSeconds);
  timeline_->setChecked(r.timeline);
  for (int i = 0; i < 3; ++i) patch_[i]->setValue(static_cast<int>(r.patch[i]));
  batch_->setValue(r.batch);
  steps_->setValue(static_cast<int>(std::min<std::int64_t>(r.steps, std::numeric_limits<int>::max())));
  epochs_->setValue(r.epochs);
  stepsPerEpoch_->setValue(static_cast<int>(r.stepsPerEpoch));
  validateEvery_->setValue(static_cast<int>(r.validateEvery));
  checkpointEvery_->setValue(static_cast<int>(r.checkpointEvery));
  lr_->setValue(r.learningRate);
  lrSchedule_->setCurrentIndex(lrSchedule_->findData(QString::fromStdString(run::toString(r.lrSchedule))));
  seed_->setText(QString::number(r.seed));
  // Exact, so applying the form unchanged keeps the budget to the byte.
  const std::int64_t b = r.cpuBudgetBytes;
  cpuBudget_->setText(b <= 0                      ? QString("none")
                      : b % (std::int64_t{1} << 30) == 0 ? QString("%1GiB").arg(b >> 30)
                      : b % (std::int64_t{1} << 20) == 0 ? QString("%1MiB").arg(b >> 20)
                                                         : QString::number(b));
  intensity_->setCurrentText(QString::fromStdString(r.preprocessing.intensity.preset));
  for (int i = 0; i < 3; ++i) spacing_[i]->setValue(r.preprocessing.targetSpacing[i]);
  checkpoint_->setText(QString::fromStdString(r.checkpoint));
  for (int i = 0; i < 3; ++i) window_[i]->setValue(static_cast<int>(r.window[i]));
  overlap_->setValue(r.overlap);
  for (int i = 0; i < 3; ++i) mirror_[i]->setChecked(r.mirror[static_cast<std::size_t>(i)]);
  keepLargest_->setChecked(r.keepLargest);
  for (auto* e : {options_, placement_, precision_, recompute_, checkpoint_}) e->setCursorPosition(0);  // show the start
  shown_.clear();
  for (auto* d : {lr_, overlap_, spacing_[0], spacing_[1], spacing_[2]}) shown_[d] = d->value();
}

bool RunSettingsDialog::apply() {
  problems_.clear();
  auto bad = [this](const QString& field, const QString& message) { problems_ << field + ": " + message; };
  run::RunSpec r = session_->run();
  const auto stages = session_->stageNames();
  nlohmann::json options;
  try {
    options = parseJson(options_->text().toStdString(), "network.options");
    if (!options.is_object()) bad("network.options", tr("must be a JSON object"));
  } catch (const std::exception& e) {
    bad("network.options", tr("not JSON (%1)").arg(e.what()));
  }
  try {
    r.setPlacement(placement::Placement::parse(placement_->text().toStdString(), stages, session_->defaultDevice()));
  } catch (const std::exception& e) {
    bad("placement", QString::fromUtf8(e.what()));
  }
  try {
    r.precision = placement::StagePrecisions::parse(precision_->text().toStdString(), stages);
  } catch (const std::exception& e) {
    bad("precision", QString::fromUtf8(e.what()));
  }
  try {
    r.recompute = run::parseStageList(recompute_->text().toStdString(), stages);
  } catch (const std::exception& e) {
    bad("recompute", QString::fromUtf8(e.what()));
  }
  r.offload = offload_->isChecked();
  r.cpuLayout = planner::cpuLayoutFromString(cpuLayout_->currentText().toStdString());
  r.shardAxis = placement::shardAxisFromString(shardAxis_->currentText().toStdString());
  r.microBatches = micro_->value();
  r.rankTimeoutSeconds = rankTimeout_->value();
  r.timeline = timeline_->isChecked();
  for (int i = 0; i < 3; ++i) r.patch[i] = patch_[i]->value();
  r.batch = batch_->value();
  r.steps = steps_->value();
  r.epochs = epochs_->value();
  r.stepsPerEpoch = stepsPerEpoch_->value();
  r.validateEvery = validateEvery_->value();
  r.checkpointEvery = checkpointEvery_->value();
  // A spin box shows a rounded value: one the user did not touch keeps the run's exact number.
  auto value = [this](QDoubleSpinBox* d, double original) { return d->value() == shown_.value(d) ? original : d->value(); };
  r.learningRate = value(lr_, r.learningRate);
  r.lrSchedule = run::lrScheduleFromString(lrSchedule_->currentData().toString().toStdString());
  bool seedOk = false;
  const qulonglong seed = seed_->text().trimmed().toULongLong(&seedOk);
  if (seedOk) r.seed = seed;
  else bad("seed", tr("must be a whole number ≥ 0"));
  const QString budget = cpuBudget_->text().trimmed();
  try {
    r.cpuBudgetBytes = budget.isEmpty() || budget == "none" ? 0 : parseBytes(budget.toStdString());
  } catch (const std::exception& e) {
    bad("cpu_budget", QString::fromUtf8(e.what()));
  }
  try {
    r.preprocessing.intensity = intensityPreset(intensity_->currentText().toStdString());
  } catch (const std::exception& e) {
    bad("preprocessing.intensity", QString::fromUtf8(e.what()));
  }
  for (int i = 0; i < 3; ++i) r.preprocessing.targetSpacing[i] = value(spacing_[i], r.preprocessing.targetSpacing[i]);
  r.checkpoint = checkpoint_->text().trimmed().toStdString();
  for (int i = 0; i < 3; ++i) r.window[i] = window_[i]->value();
  r.overlap = value(overlap_, r.overlap);
  for (int i = 0; i < 3; ++i) r.mirror[static_cast<std::size_t>(i)] = mirror_[i]->isChecked();
  r.keepLargest = keepLargest_->isChecked();
  // The data source is the Training panel's (it fills the open volume's path at Start): its
  // fields are checked there, not here.
  if (problems_.isEmpty())
    for (const auto& p : r.validate({}, stages))
      if (p.field.rfind("data.", 0) != 0) problems_ << QString::fromStdString(p.text());
  if (!problems_.isEmpty()) {
    QStringList escaped;
    for (const auto& p : problems_) escaped << p.toHtmlEscaped();
    problemsLabel_->setText(tr("Not applied:<br>%1").arg(escaped.join("<br>")));
    problemsLabel_->show();
    return false;
  }
  problemsLabel_->hide();
  // A new network first (it resets what depends on the stages), then the rest of the run.
  const std::string arch = arch_->currentText().toStdString();
  if (arch != session_->run().architecture || options != session_->run().networkOptions) {
    try {
      session_->createNetwork(arch, options);
    } catch (const std::exception& e) {
      problems_ << "network: " + QString::fromUtf8(e.what());
      problemsLabel_->setText(tr("Not applied:<br>%1").arg(problems_.back().toHtmlEscaped()));
      problemsLabel_->show();
      return false;
    }
  }
  r.architecture = session_->run().architecture;
  r.networkOptions = session_->run().networkOptions;
  runedit::setRun(session_, r, tr("apply run settings"));  // one undo step (nothing when unchanged)
  load(session_->run());
  return true;
}

} // namespace splitseg::ui
