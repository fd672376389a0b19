#include "ui/placement/PlacementView.h"

#include <QTextDocument>
#include <QMenu>

#include "core/base/Units.h"
#include "ui/placement/AddHostButton.h"
#include "ui/placement/DeviceColumn.h"
#include "ui/placement/MoveStagesCommand.h"
#include "ui/placement/PlannerWorker.h"
#include "ui/placement/SlabCard.h"
#include "ui/placement/StageCard.h"
#include "ui/placement/TransferOverlay.h"
#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"

#include "core/planner/AutoPlacer.h"
#include "core/planner/LargestVolume.h"
#include "core/planner/StepTime.h"

#include <QAction>
#include <QCheckBox>
#include <QApplication>

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSpinBox>
#include <QToolButton>
#include <QUndoStack>
#include <QVBoxLayout>

namespace splitseg::ui {

PlacementView::PlacementView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  auto* bar = new QHBoxLayout;
  auto* add = new QToolButton(this);
  add->setObjectName("addGpu");
  add->setText(tr("Add GPU…"));
  add->setToolTip(tr("Add a what-if GPU of a common size or of any size; it is planned for but never run on"));
  add->setPopupMode(QToolButton::InstantPopup);
  auto* cards = new QMenu(add);
  // Memory sizes of common cards (the vendors' data sheets).
  const std::vector<std::pair<int, QString>> common{{24, tr("24 GiB — RTX 4090, RTX 3090, A5000, L4")},
                                                    {40, tr("40 GiB — A100 40GB")},
                                                    {48, tr("48 GiB — RTX 6000 Ada, A6000, L40S")},
                                                    {80, tr("80 GiB — A100 80GB, H100")},
                                                    {141, tr("141 GiB — H200")}};
  for (const auto& [gib, label] : common)
    cards->addAction(label, this, [this, gib = gib] { addPlanningDevice(std::int64_t(gib) << 30); });
  cards->addSeparator();
  cards->addAction(tr("Other size…"), this, &PlacementView::askPlanningDevice);
  add->setMenu(cards);
  bar->addWidget(add);
  bar->addWidget(new AddHostButton(session_, this));
  // "Undo"/"Redo" with the command in the tooltip: the command's text ("Undo move 3 stages to
  // cuda:3") would widen the toolbar past a narrow dock and get clipped.
  auto* stack = session_->undoStack();
  auto button = [this, stack](const QString& text, bool isUndo) {
    auto* action = new QAction(text, this);
    action->setEnabled(isUndo ? stack->canUndo() : stack->canRedo());
    connect(action, &QAction::triggered, stack, isUndo ? &QUndoStack::undo : &QUndoStack::redo);
    connect(stack, isUndo ? &QUndoStack::canUndoChanged : &QUndoStack::canRedoChanged, action, &QAction::setEnabled);
    connect(stack, isUndo ? &QUndoStack::undoTextChanged : &QUndoStack::redoTextChanged, action,
            [action, text](const QString& command) { action->setToolTip(command.isEmpty() ? text : text + " " + command); });
    auto* b = new QToolButton(this);
    b->setDefaultAction(action);
    return b;
  };
  auto* undo = button(tr("Undo"), true);
  auto* redo = button(tr("Redo"), false);
  bar->addWidget(undo);
  bar->addWidget(redo);
  auto* autoPlace = new QPushButton(tr("Auto-place"), this);
  autoPlace->setToolTip(tr("Let the planner choose the devices: the placement that fits with the shortest "
                           "predicted step time (a CPU only when the GPUs cannot hold the stages), then the "
                           "smallest peak, then the least traffic (one undo step)"));
  connect(autoPlace, &QPushButton::clicked, this, &PlacementView::autoPlace);
  bar->addWidget(autoPlace);
  auto* largest = new QPushButton(tr("Largest cube"), this);
  largest->setToolTip(tr("The largest cube whose training step fits with this placement"));
  connect(largest, &QPushButton::clicked, this, &PlacementView::findLargestVolume);
  bar->addWidget(largest);
  auto* speed = new QPushButton(tr("Measure speed"), this);
  speed->setObjectName("measureSpeed");
  speed->setToolTip(tr("Time a few training steps of this network on this machine's devices (at the patch, "
                       "or the largest like it up to 96³) so that the predicted step time and Auto-place use "
                       "this machine's speeds instead of the defaults"));
  connect(speed, &QPushButton::clicked, this, &PlacementView::measureSpeeds);
  bar->addWidget(speed);
  busy_ = new QProgressBar(this);
  busy_->setObjectName("plannerBusy");
  busy_->setRange(0, 0);  // indeterminate: the planner cannot say how far it is
  busy_->setMaximumWidth(90);
  busy_->setTextVisible(false);
  busy_->setToolTip(tr("The memory planner is working (on a worker thread: keep editing)"));
  busy_->hide();
  bar->addWidget(busy_);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setObjectName("plannerCancel");
  cancel_->setToolTip(tr("Stop Auto-place, Largest cube or the speed measurement (Esc)"));
  cancel_->setShortcut(Qt::Key_Escape);
  cancel_->hide();
  connect(cancel_, &QPushButton::clicked, this, &PlacementView::cancelPlanning);
  bar->addWidget(cancel_);
  bar->addStretch(1);
  layout->addLayout(bar);
  planner_ = new PlannerWorker(this);
  connect(planner_, &PlannerWorker::estimated, this, [this](const PlacementEstimate& e) {
    estimate_ = e;
    showNumbers();
    Q_EMIT estimateShown();
  });
  connect(planner_, &PlannerWorker::busyChanged, this, [this](bool busy, bool searching) {
    busy_->setVisible(busy);
    cancel_->setVisible(searching);
  });
  // Keyboard: every drag has a key (the view or any card having focus).
  auto key = [this](const QKeySequence& k, auto fn) {
    auto* sc = new QShortcut(k, this);
    sc->setContext(Qt::WidgetWithChildrenShortcut);
    connect(sc, &QShortcut::activated, this, fn);
  };
  key(QKeySequence(Qt::ALT | Qt::Key_Left), [this] { moveSelectionBy(-1); });
  key(QKeySequence(Qt::ALT | Qt::Key_Right), [this] { moveSelectionBy(1); });
  key(QKeySequence(Qt::ALT | Qt::SHIFT | Qt::Key_Right), [this] { shardSelectionOntoNext(); });
  key(QKeySequence(Qt::ALT | Qt::Key_Up), [this] { selectNeighbour(-1); });
  key(QKeySequence(Qt::ALT | Qt::Key_Down), [this] { selectNeighbour(1); });
  setFocusPolicy(Qt::StrongFocus);

  auto* settings = new QHBoxLayout;
  settings->addWidget(new QLabel(tr("Plan for patch"), this));
  patch_ = new QSpinBox(this);
  patch_->setRange(16, 512);
  patch_->setSingleStep(16);
  patch_->setSuffix("³");
  patch_->setValue(static_cast<int>(session_->run().patch[0]));
  settings->addWidget(patch_);
  settings->addWidget(new QLabel(tr("batch"), this));
  batch_ = new QSpinBox(this);
  batch_->setRange(1, 16);
  batch_->setValue(session_->run().batch);
  settings->addWidget(batch_);
  precision_ = new QComboBox(this);
  precision_->addItems({"fp32", "bf16"});
  precision_->setToolTip(tr("Precision of activations (autocast) for every stage; a stage card's fp32/bf16 "
                            "toggle sets one stage. Weights and optimizer stay fp32"));
  settings->addWidget(precision_);
  offload_ = new QCheckBox(tr("Host offload"), this);
  offload_->setObjectName("hostOffload");
  offload_->setToolTip(tr("Recomputed stages on GPUs keep their saved inputs in pinned host memory between "
                          "forward and backward: larger volumes fit, at the cost of two host copies per step"));
  offload_->setChecked(session_->run().offload);
  settings->addWidget(offload_);
  settings->addStretch(1);
  layout->addLayout(settings);
  // Each edit one undo step (a run of spin-box steps merges into one); undo's runChanged sets the
  // controls back with their signals blocked (syncControls), so it pushes nothing.
  connect(patch_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int edge) { runedit::setPatch(session_, edge); });
  connect(batch_, qOverload<int>(&QSpinBox::valueChanged), this, [this](int batch) { runedit::setBatch(session_, batch); });
  connect(offload_, &QCheckBox::toggled, this, [this](bool on) { runedit::setOffload(session_, on); });
  connect(precision_, &QComboBox::currentTextChanged, this, [this](const QString& p) {
    runedit::setAllPrecision(session_, placement::precisionFromString(p.toStdString()));  // the combo box sets every stage
  });

  scroll_ = new QScrollArea(this);
  scroll_->setWidgetResizable(true);
  scroll_->setFrameShape(QFrame::NoFrame);
  board_ = new QWidget(scroll_);
  board_->installEventFilter(this);
  columnsLayout_ = new QHBoxLayout(board_);
  columnsLayout_->setSpacing(44);  // room for the transfer curves between columns
  columnsLayout_->setContentsMargins(6, 6, 6, 6);
  columnsLayout_->setAlignment(Qt::AlignLeft);
  scroll_->setWidget(board_);
  layout->addWidget(scroll_, 1);
  overlay_ = new TransferOverlay(board_);

  summary_ = new QLabel(this);
  summary_->setObjectName("placementSummary");
  summary_->setWordWrap(true);
  layout->addWidget(summary_);

  ghost_ = new QLabel(this);
  ghost_->setStyleSheet("background: #2d3b52; color: white; border: 2px solid #e8c15a; border-radius: 6px; padding: 4px 8px;");
  ghost_->setAttribute(Qt::WA_TransparentForMouseEvents);
  ghost_->hide();

  connect(session_, &Session::devicesChanged, this, [this] { rebuildColumns(); placeCards(); refreshNumbers(); });
  connect(session_, &Session::rankProblemsChanged, this, [this] {
    for (auto* c : columns_)
      if (c->rank() >= 0) c->setProblem(session_->rankProblem(c->rank()));
  });
  connect(session_, &Session::networkChanged, this, [this] { rebuildCards(); placeCards(); refreshNumbers(); });
  connect(session_, &Session::placementChanged, this, [this] { largest_.clear(); placeCards(); refreshNumbers(); });
  connect(session_, &Session::runChanged, this, [this] { largest_.clear(); syncControls(); refreshNumbers(); });
  connect(session_, &Session::speedsChanged, this, &PlacementView::showNumbers);
  rebuildColumns();
  rebuildCards();
  placeCards();
  refreshNumbers();
}

DeviceColumn* PlacementView::column(const QString& device) const {
  for (auto* c : columns_)
    if (QString::fromStdString(c->device()) == device) return c;
  return nullptr;
}

QStringList PlacementView::selectedStages() const {
  // In network order, so a multi-card drop keeps the U-Net order in the target column.
  QStringList out;
  for (const auto& s : session_->stageNames())
    if (selected_.contains(QString::fromStdString(s))) out << QString::fromStdString(s);
  return out;
}

void PlacementView::setSelection(const QStringList& stages) {
  selected_ = QSet<QString>(stages.begin(), stages.end());
  for (auto it = cards_.begin(); it != cards_.end(); ++it) it.value()->setSelected(selected_.contains(it.key()));
}

void PlacementView::rebuildColumns() {
  // Cards survive column rebuilds: park them on the board first.
  for (auto* c : cards_) c->setParent(board_);
  for (const auto& list : slabs_)
    for (auto* slab : list) slab->setParent(board_);
  for (auto* c : columns_) {
    // Out of the layout now, not when deleteLater runs, so the new columns start at the left.
    columnsLayout_->removeWidget(c);
    c->hide();
    c->deleteLater();
  }
  columns_.clear();
  for (const auto& d : session_->devices()) {
    auto* col = new DeviceColumn(d, board_);
    connect(col, &DeviceColumn::removeRequested, this, [this](const QString& name) {
      const int rank = placement::splitRank(name.toStdString()).rank;
      if (rank >= 0)
        session_->removeRank(rank);
      else
        session_->removePlanningDevice(name.toStdString());
    });
    if (col->rank() >= 0) col->setProblem(session_->rankProblem(col->rank()));
    columnsLayout_->addWidget(col);
    columns_.push_back(col);
  }
  overlay_->raise();
}

void PlacementView::rebuildCards() {
  for (auto* c : cards_) c->deleteLater();
  cards_.clear();
  for (const auto& list : slabs_)
    for (auto* slab : list) slab->deleteLater();
  slabs_.clear();
  selected_.clear();
  for (const auto& s : session_->stages()) {
    const QString name = QString::fromStdString(s.name);
    auto* card = new StageCard(name, board_);
    connect(card, &StageCard::pressed, this, &PlacementView::onPressed);
    connect(card, &StageCard::clicked, this, &PlacementView::onClicked);
    connect(card, &StageCard::dragMoved, this, &PlacementView::onDragMoved);
    connect(card, &StageCard::dragDropped, this, &PlacementView::onDropped);
    connect(card, &StageCard::contextMenuRequested, this, &PlacementView::showCardMenu);
    connect(card, &StageCard::checkpointToggled, this, [this](const QString& stage, bool on) {
      runedit::setRecompute(session_, stage.toStdString(), on);
    });
    connect(card, &StageCard::precisionToggled, this, [this](const QString& stage, bool bf16) {
      runedit::setStagePrecision(session_, stage.toStdString(), bf16 ? placement::Precision::BF16 : placement::Precision::FP32);
    });
    cards_.insert(name, card);
  }
}

void PlacementView::placeCards() {
  const auto& p = session_->placement();
  if (p.stages().empty()) return;
  for (const auto& s : session_->stageNames()) {
    const QString name = QString::fromStdString(s);
    auto* card = cards_.value(name);
    auto* col = column(QString::fromStdString(p.deviceOf(s)));
    if (!card) continue;
    if (col) {
      col->addCard(card);  // re-adding in stage order keeps the U order in every column
      card->show();
    } else {
      card->hide();
    }
    // The other shards' slabs, each in its device's column at the stage's place in the U.
    const auto shards = p.shardsOf(s);
    auto& slabs = slabs_[name];
    while (slabs.size() > static_cast<qsizetype>(shards.size()) - 1) slabs.takeLast()->deleteLater();
    while (slabs.size() < static_cast<qsizetype>(shards.size()) - 1) {
      auto* slab = new SlabCard(name, board_);
      connect(slab, &SlabCard::clicked, this, [this](const QString& stage) { setSelection({stage}); });
      slabs.push_back(slab);
    }
    for (qsizetype k = 0; k < slabs.size(); ++k) {
      const auto& device = shards[static_cast<std::size_t>(k + 1)];
      slabs[k]->setSlab(static_cast<int>(k + 1), static_cast<int>(shards.size()), 0, QString::fromStdString(device));
      if (auto* c = column(QString::fromStdString(device))) {
        c->addSlab(slabs[k]);
        slabs[k]->show();
      } else {
        slabs[k]->hide();
      }
    }
    if (slabs.isEmpty()) slabs_.remove(name);
  }
}

void PlacementView::refreshNumbers() {
  if (!session_->placement().stages().empty())
    planner_->estimate(session_->structure(), StageMemoryModel::request(*session_));
  showNumbers();  // the placement line now; the planner's figures when it answers
}

bool PlacementView::planning() const { return planner_->busy(); }

void PlacementView::showNumbers() {
  const auto& settings = session_->run();
  for (const auto& s : session_->stages()) {
    auto* card = cards_.value(QString::fromStdString(s.name));
    if (!card) continue;
    const auto bytes = estimate_.stageBytes[s.name];
    // Short enough for a card in a 165-pixel column ("29k params · 130.4 MiB"); exact in the tooltip.
    const double n = double(s.parameters);
    const QString count = n < 1e3   ? QString::number(s.parameters)
                          : n < 1e6 ? QString("%1k").arg(n / 1e3, 0, 'f', n < 1e4 ? 1 : 0)
                                    : QString("%1M").arg(n / 1e6, 0, 'f', n < 1e7 ? 2 : 1);
    card->setDetails(tr("%1 params").arg(count),
                     QString::fromStdString(formatBytes(double(bytes))),
                     tr("%1: %2 → %3 channels at 1/%4 resolution\n%5 parameters\n%6 memory at %7^3 × %8 (%9)")
                         .arg(QString::fromStdString(s.name)).arg(s.inChannels).arg(s.outChannels).arg(1 << s.level)
                         .arg(s.parameters).arg(estimate_.plan ? tr("predicted") : tr("not planned"))
                         .arg(settings.patch[0]).arg(settings.batch).arg(QString::fromStdString(placement::toString(settings.precision.of(s.name)))));
    const auto shards = session_->placement().shardsOf(s.name);
    QString shardText;
    if (shards.size() > 1) {
      const std::string entry = session_->placement().entryOf(s.name);
      QStringList slabs;
      if (estimate_.plan && estimate_.plan->slabs.count(entry))
        for (const auto n : estimate_.plan->slabs.at(entry)) slabs << QString::number(n);
      shardText = tr("× %1 slabs %2").arg(shards.size()).arg(slabs.isEmpty() ? QString() : "(" + slabs.join("/") + " planes)");
      card->setToolTip(card->toolTip() + tr("\nSharded across %1: each device computes one slab, halos exchanged before every 3×3×3 convolution")
                                             .arg(QString::fromStdString(entry)));
    }
    card->setShards(shardText);
    if (shards.size() > 1) {
      const std::string entry = session_->placement().entryOf(s.name);
      const auto& slabs = slabs_.value(QString::fromStdString(s.name));
      for (qsizetype k = 0; k < slabs.size(); ++k) {
        std::int64_t planes = 0;
        if (estimate_.plan && estimate_.plan->slabs.count(entry) &&
            estimate_.plan->slabs.at(entry).size() > static_cast<std::size_t>(k + 1))
          planes = estimate_.plan->slabs.at(entry)[static_cast<std::size_t>(k + 1)];
        slabs[k]->setSlab(static_cast<int>(k + 1), static_cast<int>(shards.size()), planes,
                          QString::fromStdString(shards[static_cast<std::size_t>(k + 1)]));
      }
    }
    card->setCheckpointed(settings.recompute.count(s.name) > 0);
    card->setBf16(settings.precision.of(s.name) == placement::Precision::BF16);
  }
  for (auto* col : columns_) {
    col->setPredicted(estimate_.deviceBytes[col->device()], estimate_.plan.has_value());
    if (estimate_.plan)
      for (const auto& d : estimate_.plan->devices)
        if (d.name == col->device())
          col->setToolTip(Qt::convertFromPlainText(tr("Peak %1 during %2 of %3\nparameters+optimizer %4, activations %5, received %6")
                              .arg(QString::fromStdString(formatBytes(double(d.peak))), QString::fromStdString(d.peakPhase),
                                   QString::fromStdString(d.peakStage), QString::fromStdString(formatBytes(double(d.persistentBytes))),
                                   QString::fromStdString(formatBytes(double(d.activationBytes))),
                                   QString::fromStdString(formatBytes(double(d.transferBytes))))));
  }
  overlay_->setTransfers(estimate_.transfers, cards_);
  std::int64_t traffic = 0;
  for (const auto& t : estimate_.transfers) traffic += t.bytesPerStep;
  // Stage and device names can come from a session or a rank's host, someone else's text: escaped.
  const auto esc = [](const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); };
  QString text = tr("Placement: %1").arg(esc(session_->placement().describe()));
  if (!estimate_.transfers.empty())
    text += tr("<br>%1 cross-device tensors, %2 MB per step").arg(estimate_.transfers.size()).arg(double(traffic) / 1e6, 0, 'f', 1);
  if (estimate_.plan && estimate_.plan->haloBytes > 0)
    text += tr("<br>Sharded stages: %1 MB of halos exchanged per step").arg(double(estimate_.plan->haloBytes) / 1e6, 0, 'f', 1);
  if (estimate_.plan && estimate_.plan->offloadBytes > 0)
    text += tr("<br>Host offload: %1 of pinned host memory, copied out and back every step")
                .arg(QString::fromStdString(formatBytes(double(estimate_.plan->offloadBytes))));
  else if (settings.offload)
    text += tr("<br>Host offload is on, but no recomputed stage runs on a GPU: nothing is offloaded");
  QStringList over;
  for (auto* col : columns_)
    if (col->overCapacity()) over << esc(col->device());
  if (!over.isEmpty()) text += tr("<br><span style='color:#ff6b6b'>Over capacity: %1</span>").arg(over.join(", "));
  if (estimate_.plan && estimate_.structure) {
    const auto& plan = *estimate_.plan;
    text += plan.fits ? tr("<br>Planner: fits at %1<sup>3</sup> × %2; tightest %3 (peak in %4)")
                            .arg(settings.patch[0]).arg(settings.batch)
                            .arg(esc(plan.limitingDevice), esc(plan.limitingStage))
                      : tr("<br><span style='color:#ff6b6b'>Planner: does not fit at %1<sup>3</sup> × %2 — %3 runs out in %4</span>")
                            .arg(settings.patch[0]).arg(settings.batch)
                            .arg(esc(plan.limitingDevice), esc(plan.limitingStage));
    // What Auto-place ranks placements by: the predicted step time, with the speeds measured
    // here where there are some (Measure speed), else the planner's defaults.
    const auto time = planner::predictStepTime(plan, StageMemoryModel::devices(*session_), *estimate_.structure);
    QStringList speeds;
    for (const auto& [device, m] : session_->measuredSpeeds())
      speeds << tr("%1 %2 GFLOP/s at %3×%4×%5").arg(esc(device)).arg(m.flopsPerSecond / 1e9, 0, 'f', 1)
                    .arg(m.patch[0]).arg(m.patch[1]).arg(m.patch[2]);
    const QString compute = time.pipelinedRanks > 0
                                ? tr("GPipe over %1 ranks × %2 micro-batches, busiest rank computes %3 s")
                                      .arg(time.pipelinedRanks).arg(plan.microBatches).arg(time.computeSeconds, 0, 'g', 3)
                                : tr("compute %1 s").arg(time.computeSeconds, 0, 'g', 3);
    text += tr("<br>Predicted step: %1 s (%2, transfers %3 s; %4)")
                .arg(time.seconds, 0, 'g', 3).arg(compute).arg(time.transferSeconds, 0, 'g', 3)
                .arg(speeds.isEmpty() ? tr("default device speeds") : tr("measured: %1").arg(speeds.join(", ")));
  }
  if (!estimate_.error.empty())
    text += tr("<br><span style='color:#ff6b6b'>Planner: cannot plan this run — %1</span>")
                .arg(esc(estimate_.error));
  if (!largest_.isEmpty()) text += "<br>" + largest_;
  summary_->setText(text);
}

void PlacementView::syncControls() {
  // Another panel (or a session) changed the run: show its patch, batch and precision.
  const auto& run = session_->run();
  const QSignalBlocker b1(patch_), b2(batch_), b3(precision_), b4(offload_);
  offload_->setChecked(run.offload);
  patch_->setValue(static_cast<int>(run.patch[0]));
  batch_->setValue(run.batch);
  precision_->setCurrentText(QString::fromStdString(placement::toString(run.precision.fallback)));
}

void PlacementView::onPressed(const QString& stage, Qt::KeyboardModifiers mods) {
  // Pressing an unselected card without Ctrl makes it the selection, so a drag moves it alone;
  // pressing a selected one keeps the group for a multi-card drag.
  if (!(mods & Qt::ControlModifier) && !selected_.contains(stage)) setSelection({stage});
}

void PlacementView::onClicked(const QString& stage, Qt::KeyboardModifiers mods) {
  if (mods & Qt::ControlModifier) {
    auto sel = selectedStages();
    if (selected_.contains(stage)) sel.removeAll(stage);
    else sel << stage;
    setSelection(sel);
  } else {
    setSelection({stage});
  }
}

DeviceColumn* PlacementView::columnAt(const QPoint& globalPos) const {
  for (auto* c : columns_)
    if (c->rect().contains(c->mapFromGlobal(globalPos))) return c;
  return nullptr;
}

void PlacementView::onDragMoved(const QString& stage, const QPoint& globalPos) {
  if (!selected_.contains(stage)) setSelection({stage});
  const auto sel = selectedStages();
  ghost_->setText(sel.size() == 1 ? sel.front() : tr("%1 stages").arg(sel.size()));
  ghost_->adjustSize();
  ghost_->move(mapFromGlobal(globalPos) + QPoint(12, 8));
  ghost_->show();
  ghost_->raise();
  auto* target = columnAt(globalPos);
  for (auto* c : columns_) c->setDropHighlight(c == target);
}

void PlacementView::onDropped(const QString& stage, const QPoint& globalPos) {
  ghost_->hide();
  for (auto* c : columns_) c->setDropHighlight(false);
  auto* target = columnAt(globalPos);
  if (!target) return;
  if (!selected_.contains(stage)) setSelection({stage});
  auto* card = cards_.value(stage);
  if (card && (card->dropModifiers() & Qt::ShiftModifier)) shardOnto(selectedStages(), target->device());
  else moveStages(selectedStages(), target->device());
}

void PlacementView::shardStages(const QStringList& stages, const std::vector<std::string>& devices) {
  if (devices.empty()) return;
  std::string entry;
  for (const auto& d : devices) entry += (entry.empty() ? "" : "+") + d;
  const auto before = session_->placement();
  placement::Placement after;
  try {
    after = MoveStagesCommand::moved(before, stages, entry);
  } catch (const std::exception& e) {
    Q_EMIT session_->message(tr("Cannot shard: %1").arg(e.what()));
    return;
  }
  if (after == before) return;
  const QString what = stages.size() == 1 ? stages.front() : tr("%1 stages").arg(stages.size());
  session_->undoStack()->push(new MoveStagesCommand(session_, before, after,
                                                    devices.size() > 1 ? tr("shard %1 across %2").arg(what, QString::fromStdString(entry))
                                                                       : tr("place %1 on %2").arg(what, QString::fromStdString(entry))));
  Q_EMIT placementEdited();
}

void PlacementView::shardOnto(const QStringList& stages, const std::string& device) {
  const auto& p = session_->placement();
  if (stages.isEmpty()) return;
  // The first stage's shards plus the target: the selection shares one slab layout.
  auto shards = p.shardsOf(stages.front().toStdString());
  if (std::find(shards.begin(), shards.end(), device) == shards.end()) shards.push_back(device);
  shardStages(stages, shards);
}

void PlacementView::showCardMenu(const QString& stage, const QPoint& globalPos) {
  if (!selected_.contains(stage)) setSelection({stage});
  const QStringList stages = selectedStages();
  QMenu menu(this);
  auto* across = menu.addMenu(tr("Shard across"));
  // Consecutive columns, two or more: the slabs follow the columns' order.
  for (int i = 0; i < columns_.size(); ++i)
    for (int j = i + 1; j < columns_.size(); ++j) {
      std::vector<std::string> devices;
      QStringList names;
      for (int k = i; k <= j; ++k) {
        devices.push_back(columns_[k]->device());
        names << QString::fromStdString(columns_[k]->device());
      }
      across->addAction(names.join(" + "), this, [this, stages, devices] { shardStages(stages, devices); });
    }
  across->setEnabled(!across->isEmpty());
  const auto shards = session_->placement().shardsOf(stage.toStdString());
  if (shards.size() > 1) {
    const std::string first = shards.front();
    menu.addAction(tr("Place on %1 only").arg(QString::fromStdString(first)), this,
                   [this, stages, first] { shardStages(stages, {first}); });
  }
  menu.exec(globalPos);
}

void PlacementView::moveStages(const QStringList& stages, const std::string& device) {
  const auto before = session_->placement();
  const auto after = MoveStagesCommand::moved(before, stages, device);
  if (after == before) return;
  if (session_->busy()) {
    Q_EMIT session_->message(tr("A run is using the network: the placement applies to the next run"));
  }
  const QString what = stages.size() == 1 ? stages.front() : tr("%1 stages").arg(stages.size());
  session_->undoStack()->push(new MoveStagesCommand(session_, before, after,
                                                    tr("move %1 to %2").arg(what, QString::fromStdString(device))));
  Q_EMIT placementEdited();
}

void PlacementView::addPlanningDevice(std::int64_t bytes) { session_->addPlanningDevice(bytes); }

void PlacementView::autoPlace() {
  const auto structure = session_->structure();
  if (!structure) return;
  planner_->autoPlace(structure, StageMemoryModel::request(*session_),
                      [this](std::optional<planner::AutoPlaceResult> result, const QString& error) {
    bool changed = false;
    if (!result) {
      Q_EMIT session_->message(error == tr("cancelled") ? tr("Auto-place cancelled: the placement is unchanged")
                                                        : tr("Auto-place failed: %1").arg(error));
    } else {
      const auto before = session_->placement();
      if (result->placement != before) {
        session_->undoStack()->push(new MoveStagesCommand(session_, before, result->placement, tr("auto-place")));
        changed = true;
      }
      Q_EMIT session_->message(tr("Auto-place (%1, %2 placements evaluated): %3%4")
                                   .arg(QString::fromStdString(result->method)).arg(result->evaluated)
                                   .arg(QString::fromStdString(result->placement.describe()))
                                   .arg(result->plan.fits ? QString() : tr(" — does not fit anywhere at this size")));
    }
    if (changed) Q_EMIT placementEdited();
    Q_EMIT autoPlaceDone(changed);
  });
}

void PlacementView::findLargestVolume() {
  const auto structure = session_->structure();
  if (!structure) return;
  const auto batch = session_->run().batch;
  planner_->largestCube(structure, StageMemoryModel::request(*session_),
                        [this, batch](std::optional<planner::LargestVolume> r, const QString& error) {
    if (!r)
      largest_ = error == tr("cancelled") ? tr("Largest cube: cancelled") : tr("Largest volume: %1").arg(error.toHtmlEscaped());
    else
      largest_ = r->edge > 0 ? tr("Largest cube for this placement: <b>%1<sup>3</sup></b> × %2 (next size runs out on %3 in %4)")
                                   .arg(r->edge).arg(batch)
                                   .arg(QString::fromStdString(r->next.limitingDevice).toHtmlEscaped(),
                                        QString::fromStdString(r->next.limitingStage).toHtmlEscaped())
                             : tr("Not even the smallest cube fits with this placement");
    showNumbers();
    Q_EMIT largestDone();
  });
}

void PlacementView::measureSpeeds() {
  const auto structure = session_->structure();
  if (!structure) return;
  if (session_->busy()) {
    // Measuring beside a run would time both.
    Q_EMIT session_->message(tr("Measure speed: stop the run first (it would share the devices with the measurement)"));
    Q_EMIT speedsMeasured(false);
    return;
  }
  // This process's devices that stages can run on; a rank's device is measured here as its kind.
  std::vector<std::string> devices;
  for (const auto& d : session_->runnableDevices())
    if (placement::splitRank(d).rank < 0) devices.push_back(d);
  const auto patch = engine::measurementPatch(session_->run().patch, structure->sizeDivisor);
  QStringList names;
  for (const auto& d : devices) names << QString::fromStdString(d);
  Q_EMIT session_->message(tr("Measuring the training speed of %1 at %2×%3×%4…")
                               .arg(names.join(", ")).arg(patch[0]).arg(patch[1]).arg(patch[2]));
  planner_->measureSpeeds(structure, session_->run(), devices, patch,
                          [this](std::optional<PlannerWorker::Speeds> speeds, const QString& error) {
    if (!speeds) {
      Q_EMIT session_->message(error == tr("cancelled") ? tr("Speed measurement cancelled: the speeds are unchanged")
                                                        : tr("Speed measurement failed: %1").arg(error));
      Q_EMIT speedsMeasured(false);
      return;
    }
    QStringList parts;
    for (const auto& [device, m] : *speeds)
      parts << tr("%1 %2 GFLOP/s (step %3 s)").arg(QString::fromStdString(device)).arg(m.flopsPerSecond / 1e9, 0, 'f', 1)
                   .arg(m.stepSeconds, 0, 'g', 3);
    session_->setMeasuredSpeeds(std::move(*speeds));
    Q_EMIT session_->message(tr("Measured: %1").arg(parts.join(", ")));
    Q_EMIT speedsMeasured(true);
  });
}

void PlacementView::cancelPlanning() { planner_->cancelSearch(); }

void PlacementView::moveSelectionBy(int delta) {
  const auto stages = selectedStages();
  if (stages.isEmpty()) return;
  const auto first = session_->placement().deviceOf(stages.front().toStdString());
  for (int i = 0; i < columns_.size(); ++i)
    if (columns_[i]->device() == first) {
      const int j = i + delta;
      if (j >= 0 && j < columns_.size()) moveStages(stages, columns_[j]->device());
      return;
    }
}

void PlacementView::shardSelectionOntoNext() {
  const auto stages = selectedStages();
  if (stages.isEmpty()) return;
  const auto shards = session_->placement().shardsOf(stages.front().toStdString());
  for (int i = 0; i + 1 < columns_.size(); ++i)
    if (columns_[i]->device() == shards.back()) {
      shardOnto(stages, columns_[i + 1]->device());
      return;
    }
}

void PlacementView::selectNeighbour(int delta) {
  const auto names = session_->stageNames();
  if (names.empty()) return;
  const auto sel = selectedStages();
  int at = delta > 0 ? -1 : static_cast<int>(names.size());
  if (!sel.isEmpty())
    at = static_cast<int>(std::find(names.begin(), names.end(), (delta > 0 ? sel.back() : sel.front()).toStdString()) - names.begin());
  const int next = std::clamp(at + delta, 0, static_cast<int>(names.size()) - 1);
  setSelection({QString::fromStdString(names[static_cast<std::size_t>(next)])});
  if (auto* c = cards_.value(QString::fromStdString(names[static_cast<std::size_t>(next)]))) scroll_->ensureWidgetVisible(c);
}

int PlacementView::widthForColumns(int columns) const {
  const auto board = columnsLayout_->contentsMargins();
  const auto own = layout()->contentsMargins();
  const int column = columns_.isEmpty() ? 175 : columns_.front()->minimumWidth();
  return columns * column + std::max(0, columns - 1) * columnsLayout_->spacing() + board.left() + board.right() +
         own.left() + own.right() + scroll_->verticalScrollBar()->sizeHint().width() + 2 * scroll_->frameWidth();
}

void PlacementView::askPlanningDevice() {
  bool ok = false;
  const double gib = QInputDialog::getDouble(this, tr("Planning-only GPU"), tr("Memory of the what-if GPU (GiB):"),
                                             80.0, 1.0, 1024.0, 1, &ok);
  if (ok) addPlanningDevice(static_cast<std::int64_t>(gib * 1024.0 * 1024.0 * 1024.0));
}

void PlacementView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  overlay_->setGeometry(board_->rect());
}

bool PlacementView::eventFilter(QObject* watched, QEvent* event) {
  // The overlay covers the board exactly and repaints when cards move.
  if (watched == board_ && (event->type() == QEvent::Resize || event->type() == QEvent::LayoutRequest)) {
    overlay_->setGeometry(board_->rect());
    overlay_->raise();
    overlay_->update();
  }
  return QWidget::eventFilter(watched, event);
}

} // namespace splitseg::ui
