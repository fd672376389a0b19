// Dragging stage cards onto another device column with real mouse events changes the
// session's Placement; undo and redo walk it back and forth.
#include "tests/ui/UiTestSupport.h"

#include "ui/placement/DeviceColumn.h"
#include "ui/placement/PlacementView.h"
#include "ui/placement/SlabCard.h"
#include "ui/placement/StageCard.h"
#include "ui/placement/TransferOverlay.h"
#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"

#include "ui/training/StallMeter.h"

#include <QComboBox>
#include <QElapsedTimer>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QLabel>
#include <QMenu>
#include <QToolButton>
#include <QUndoStack>

using namespace splitseg;
using namespace splitseg::ui;

class PlacementDragDropTest : public QObject {
  Q_OBJECT

  // Press on the card, move in steps (as a hand does) to the centre of the target column, release.
  static void drag(StageCard* card, DeviceColumn* target, Qt::KeyboardModifiers mods = {}) {
    const QPoint start = card->rect().center();
    const QPoint end = card->mapFromGlobal(target->mapToGlobal(target->rect().center()));
    QTest::mousePress(card, Qt::LeftButton, mods, start);
    for (int i = 1; i <= 8; ++i) QTest::mouseMove(card, start + (end - start) * i / 8, 10);
    QTest::mouseRelease(card, Qt::LeftButton, mods, end);
    QCoreApplication::processEvents();
  }

  std::unique_ptr<Session> session_;
  std::unique_ptr<PlacementView> view_;
  QString gpu_;

  // Every transfer's label is drawn, and none covers a stage card (they used to sit on the
  // cards' edges where curves cross columns).
  void labelsCoverNoCard() {
    view_->grab();  // paints the overlay, which places the labels
    const auto* overlay = view_->overlay();
    QCOMPARE(int(overlay->labelRects().size()), overlay->transferCount());
    for (auto* card : view_->findChildren<StageCard*>()) {
      if (!card->isVisible()) continue;
      const QRectF r(card->mapTo(overlay->parentWidget(), QPoint(0, 0)), card->size());
      for (const auto& label : overlay->labelRects())
        QVERIFY2(!label.intersects(r), qPrintable(QString("a transfer label covers %1").arg(card->stage())));
    }
  }

private Q_SLOTS:
  void initTestCase() { test::installWarningTrap(); }
  void cleanup() {
    view_.reset();
    session_.reset();
    QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n")));
  }

  void init() {
    session_ = std::make_unique<Session>();
    // A second device to drag onto: a planning-only GPU, which exists on every machine.
    session_->createUNet(8, 5);
    gpu_ = QString::fromStdString(session_->addPlanningDevice(std::int64_t(80) << 30));
    view_ = std::make_unique<PlacementView>(session_.get());
    view_->resize(900, 900);
    view_->show();
    QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
  }

  void dragOneCardAndUndo() {
    auto* card = view_->card("enc0");
    auto* gpu = view_->column(gpu_);
    QVERIFY(card && gpu);
    QCOMPARE(session_->placement().deviceOf("enc0"), std::string("cpu"));
    drag(card, gpu);
    QCOMPARE(session_->placement().deviceOf("enc0"), gpu_.toStdString());
    QCOMPARE(session_->placement().deviceOf("enc1"), std::string("cpu"));
    QCOMPARE(card->parentWidget()->objectName(), QString("deviceColumn"));
    QCOMPARE(static_cast<DeviceColumn*>(card->parentWidget())->device(), gpu_.toStdString());
    // enc0 -> enc1 and the enc0 -> dec0 skip now cross devices (once the planner has answered).
    QTRY_VERIFY(!view_->planning());
    QVERIFY(view_->overlay()->transferCount() >= 2);
    labelsCoverNoCard();

    session_->undoStack()->undo();
    QCOMPARE(session_->placement().deviceOf("enc0"), std::string("cpu"));
    QTRY_VERIFY(!view_->planning());
    QCOMPARE(view_->overlay()->transferCount(), 0);
    session_->undoStack()->redo();
    QCOMPARE(session_->placement().deviceOf("enc0"), gpu_.toStdString());
  }

  // Add host > Rank process on this machine: a column "r1:cpu" with this machine's CPU memory;
  // a card dragged there is placed on rank 1 (undoable); × removes the rank, its stages come back.
  void addHostAddsARankColumn() {
    auto* add = view_->findChild<QToolButton*>("addHost");
    QVERIFY(add && add->menu());
    Q_EMIT add->menu()->aboutToShow();
    QAction* local = add->menu()->findChild<QAction*>("localRank:cpu");
    QVERIFY(local);
    local->trigger();
    auto* rank = view_->column("r1:cpu");
    QVERIFY(rank);
    QCOMPARE(rank->info().totalBytes, session_->device("cpu")->totalBytes);
    QVERIFY(QString::fromStdString(rank->info().description).startsWith("rank 1 · this machine"));
    QTRY_VERIFY(rank->isVisible() && rank->x() > view_->column("cpu")->x());  // laid out
    drag(view_->card("dec0"), rank);
    QCOMPARE(session_->placement().deviceOf("dec0"), std::string("r1:cpu"));
    QCOMPARE(session_->placement().rankCount(), 2);
    QTRY_VERIFY(!view_->planning());
    QVERIFY(view_->overlay()->transferCount() >= 2);  // dec1 -> dec0 and the enc0 skip cross ranks
    // The predicted step is the ranks' GPipe schedule ("cpu" is in rank 0's process).
    auto* summary = view_->findChild<QLabel*>("placementSummary");
    QVERIFY(summary);
    QVERIFY2(summary->text().contains("GPipe over 2 ranks"), qPrintable(summary->text()));
    labelsCoverNoCard();
    session_->undoStack()->undo();
    QCOMPARE(session_->placement().deviceOf("dec0"), std::string("cpu"));
    session_->undoStack()->redo();
    // A second local rank takes the next number.
    local->trigger();
    QVERIFY(view_->column("r2:cpu"));
    auto* remove = view_->column("r1:cpu")->findChild<QToolButton*>("removeDevice");
    QVERIFY(remove);
    QTest::mouseClick(remove, Qt::LeftButton);
    QTRY_VERIFY(!view_->column("r1:cpu"));
    QCOMPARE(session_->placement().deviceOf("dec0"), std::string("cpu"));
    QCOMPARE(session_->hosts().size(), std::size_t(1));
    QTRY_VERIFY(!view_->planning());
  }

  // A rank's own words (its error, from another machine) stay text in its column: a label and a
  // tooltip that rendered them as rich text would lay out <img> and markup from someone else.
  void rankProblemStaysText() {
    RankHost host;
    host.device = "cpu";
    const auto name = QString::fromStdString(session_->addRank(host));
    auto* column = view_->column(name);
    QVERIFY(column);
    const QString hostile = "<img src=\"/etc/passwd\"><b>rank 1 failed</b>";
    session_->setRankProblem(1, hostile);
    auto* problem = column->findChild<QLabel*>("rankProblem");
    QVERIFY(problem);
    QTRY_VERIFY(problem->isVisible());
    QCOMPARE(problem->textFormat(), Qt::PlainText);
    QCOMPARE(problem->text(), hostile);
    QVERIFY2(problem->toolTip().contains("&lt;img") && !problem->toolTip().contains("<img"), qPrintable(problem->toolTip()));
    auto* description = column->findChild<QLabel*>("deviceDescription");
    QVERIFY(description);
    QCOMPARE(description->textFormat(), Qt::PlainText);
    session_->setRankProblem(1, {});
    QTRY_VERIFY(!problem->isVisible());
  }

  void dragSeveralSelectedCards() {
    // Ctrl-click selects dec1 and dec0, then dragging one of them moves both in one undo step.
    QTest::mouseClick(view_->card("dec1"), Qt::LeftButton, Qt::ControlModifier);
    QTest::mouseClick(view_->card("dec0"), Qt::LeftButton, Qt::ControlModifier);
    QCOMPARE(view_->selectedStages(), QStringList({"dec1", "dec0"}));
    const int before = session_->undoStack()->count();
    drag(view_->card("dec0"), view_->column(gpu_));
    QCOMPARE(session_->placement().deviceOf("dec1"), gpu_.toStdString());
    QCOMPARE(session_->placement().deviceOf("dec0"), gpu_.toStdString());
    QCOMPARE(session_->undoStack()->count(), before + 1);
    session_->undoStack()->undo();
    QCOMPARE(session_->placement().deviceOf("dec1"), std::string("cpu"));
    QCOMPARE(session_->placement().deviceOf("dec0"), std::string("cpu"));
  }

  // Shift+drop onto another column shards the stage across both: one undo step, the card says how
  // the volume is cut (the planner's slabs) and the summary shows the halo traffic.
  void shiftDropShardsAcrossColumns() {
    auto* card = view_->card("dec0");
    const int before = session_->undoStack()->count();
    drag(card, view_->column(gpu_), Qt::ShiftModifier);
    QCOMPARE(session_->placement().entryOf("dec0"), "cpu+" + gpu_.toStdString());
    QCOMPARE(session_->placement().deviceOf("dec0"), std::string("cpu"));  // parameters stay on the first
    QCOMPARE(session_->undoStack()->count(), before + 1);
    QTRY_VERIFY(!view_->planning());
    auto* label = card->findChild<QLabel*>("shards");
    QVERIFY(label && label->isVisible());
    QVERIFY2(label->text().contains("2 slabs") && label->text().contains("planes"), qPrintable(label->text()));
    QVERIFY(view_->estimate().plan && view_->estimate().plan->haloBytes > 0);
    // The card spans both columns: its second slab shows in the GPU's column with its planes.
    QCOMPARE(view_->slabs("dec0").size(), qsizetype(1));
    auto* slab = view_->slabs("dec0").front();
    QCOMPARE(slab->parentWidget(), static_cast<QWidget*>(view_->column(gpu_)));
    QVERIFY(slab->isVisible());
    QVERIFY2(slab->text().contains("slab 2/2") && slab->text().contains("planes"), qPrintable(slab->text()));
    QTest::mouseClick(slab, Qt::LeftButton);
    QVERIFY(card->isSelected());
    auto* summary = view_->findChild<QLabel*>("placementSummary");
    QVERIFY(summary);
    QVERIFY2(summary->text().contains("halos exchanged per step") && summary->text().contains("Predicted step"),
             qPrintable(summary->text()));
    session_->undoStack()->undo();
    QCOMPARE(session_->placement().entryOf("dec0"), std::string("cpu"));
    QVERIFY(!label->isVisible());
    QVERIFY(view_->slabs("dec0").isEmpty());
    session_->undoStack()->redo();
    QVERIFY(session_->placement().isSharded("dec0"));
    QCOMPARE(view_->slabs("dec0").size(), qsizetype(1));
  }

  // The context menu's actions: shard over consecutive columns, then back onto the first device.
  void shardAndUnshardThroughTheView() {
    view_->setSelection({"enc0", "dec0"});
    view_->shardStages({"enc0", "dec0"}, {"cpu", gpu_.toStdString()});
    QVERIFY(session_->placement().isSharded("enc0") && session_->placement().isSharded("dec0"));
    QVERIFY(session_->run().placement.at("enc0").find('+') != std::string::npos);  // the run description keeps it
    view_->shardStages({"enc0", "dec0"}, {"cpu"});
    QVERIFY(!session_->placement().anySharded());
    // A device listed twice is refused with a message, nothing changes.
    const auto before = session_->placement();
    view_->shardStages({"enc0"}, {"cpu", "cpu"});
    QVERIFY(session_->placement() == before);
  }

  void dropOutsideChangesNothing() {
    auto* card = view_->card("head");
    const auto before = session_->placement();
    QTest::mousePress(card, Qt::LeftButton, {}, card->rect().center());
    QTest::mouseMove(card, card->rect().center() + QPoint(0, 30), 10);
    QTest::mouseMove(card, card->mapFromGlobal(view_->mapToGlobal(QPoint(3, 3))), 10);
    QTest::mouseRelease(card, Qt::LeftButton, {}, card->mapFromGlobal(view_->mapToGlobal(QPoint(3, 3))));
    QVERIFY(session_->placement() == before);
  }

  // A stage card's fp32/bf16 toggle makes that one stage bf16: the session's run settings
  // (what training hands the engine) and the plan's numbers follow; the combo box sets all.
  void precisionToggle_data() {
    QTest::addColumn<QString>("stage");
    QTest::newRow("enc0") << "enc0";
    QTest::newRow("dec1") << "dec1";
  }
  void precisionToggle() {
    QFETCH(QString, stage);
    const std::string name = stage.toStdString();
    auto* card = view_->card(stage);
    auto* toggle = card ? card->findChild<QToolButton*>("precisionToggle") : nullptr;
    QVERIFY(toggle);
    QCOMPARE(toggle->text(), QString("fp32"));
    auto planned = [this](const std::string& s) {
      for (const auto& st : view_->estimate().plan->stages)
        if (st.name == s) return st;
      return planner::StagePlan{};
    };
    QTRY_VERIFY(!view_->planning());
    QVERIFY(view_->estimate().plan);
    const auto before = planned(name);
    const auto peakBefore = view_->estimate().plan->devices.front().peak;

    QTest::mouseClick(toggle, Qt::LeftButton);
    QCOMPARE(toggle->text(), QString("bf16"));
    QVERIFY(session_->run().precision.of(name) == placement::Precision::BF16);
    QVERIFY(session_->run().precision.of("bottleneck") == placement::Precision::FP32);
    QCOMPARE(session_->run().precision.toString(session_->stageNames()), "bf16:" + name);
    QTRY_VERIFY(!view_->planning());
    const auto after = planned(name);
    QVERIFY(after.precision == placement::Precision::BF16);
    QVERIFY(after.activationBytes < before.activationBytes);
    QVERIFY(view_->estimate().plan->devices.front().peak != peakBefore);
    QVERIFY(card->toolTip().contains("bf16"));

    QTest::mouseClick(toggle, Qt::LeftButton);  // back: the plan is as before
    QCOMPARE(session_->run().precision.toString(), std::string("fp32"));
    QTRY_VERIFY(!view_->planning());
    QCOMPARE(planned(name).activationBytes, before.activationBytes);

    QTest::mouseClick(toggle, Qt::LeftButton);
    auto* combo = view_->findChild<QComboBox*>();
    QVERIFY(combo);
    combo->setCurrentText("bf16");  // every stage; the single override goes
    QCOMPARE(session_->run().precision.toString(), std::string("bf16"));
    QVERIFY(session_->run().precision.stages.empty());
    for (const auto& s : session_->stageNames()) QVERIFY(view_->card(QString::fromStdString(s))->isBf16());
  }

  void overCapacityIsMarked() {
    const auto tinyName = QString::fromStdString(session_->addPlanningDevice(std::int64_t(1) << 20));  // 1 MiB
    auto* tiny = view_->column(tinyName);
    QVERIFY(tiny);
    QVERIFY(!tiny->overCapacity());
    QTRY_VERIFY(tiny->isVisible() && tiny->width() > 100);  // laid out before the drag
    drag(view_->card("bottleneck"), tiny);
    QCOMPARE(session_->placement().deviceOf("bottleneck"), tinyName.toStdString());
    QTRY_VERIFY(view_->column(tinyName)->overCapacity());
  }

  // Alt+Left/Right moves the selected card to the neighbouring column (one undo step each),
  // Alt+Shift+Right shards it onto the next column too, Alt+Up/Down walks the stages.
  void keyboardMovesCards() {
    view_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(view_.get()));
    view_->setFocus();
    view_->setSelection({"enc1"});
    QTest::keyClick(view_.get(), Qt::Key_Down, Qt::AltModifier);
    QCOMPARE(view_->selectedStages(), QStringList({"enc2"}));
    QTest::keyClick(view_.get(), Qt::Key_Up, Qt::AltModifier);
    QTest::keyClick(view_.get(), Qt::Key_Up, Qt::AltModifier);
    QCOMPARE(view_->selectedStages(), QStringList({"enc0"}));
    const int before = session_->undoStack()->count();
    QTest::keyClick(view_.get(), Qt::Key_Right, Qt::AltModifier);
    QCOMPARE(session_->placement().deviceOf("enc0"), gpu_.toStdString());
    QCOMPARE(session_->undoStack()->count(), before + 1);
    QTest::keyClick(view_.get(), Qt::Key_Right, Qt::AltModifier);  // no column further right: nothing
    QCOMPARE(session_->undoStack()->count(), before + 1);
    QTest::keyClick(view_.get(), Qt::Key_Left, Qt::AltModifier);
    QCOMPARE(session_->placement().deviceOf("enc0"), std::string("cpu"));
    QTest::keyClick(view_.get(), Qt::Key_Right, Qt::AltModifier | Qt::ShiftModifier);
    QCOMPARE(session_->placement().entryOf("enc0"), "cpu+" + gpu_.toStdString());
    session_->undoStack()->undo();
    session_->undoStack()->undo();
    QCOMPARE(session_->placement().deviceOf("enc0"), gpu_.toStdString());
  }

  // Planning runs on a worker thread: the UI thread keeps beating while Auto-place searches
  // every assignment over four devices, and Cancel stops a search with the placement untouched.
  void plannerDoesNotBlockTheUiThread() {
    session_->addPlanningDevice(std::int64_t(24) << 30);
    session_->addPlanningDevice(std::int64_t(48) << 30);
    view_->batchBox()->setValue(2);
    QTRY_VERIFY(!view_->planning());
    StallMeter heartbeat(nullptr, 5);
    QSignalSpy done(view_.get(), &PlacementView::autoPlaceDone);
    QElapsedTimer clock;
    clock.start();
    heartbeat.start();
    view_->autoPlace();
    QVERIFY(view_->planning());
    QVERIFY(done.wait(120000));
    heartbeat.stop();
    const double searchMs = clock.elapsed();
    qInfo("auto-place over 4 devices: %.0f ms; UI thread: %d beats, longest stall %.1f ms", searchMs, heartbeat.beats(),
          heartbeat.longestStallMs());
    // The search took long enough for a blocked UI thread to show (it ran through the event loop).
    QVERIFY2(heartbeat.beats() > 10, qPrintable(QString("%1 beats in %2 ms").arg(heartbeat.beats()).arg(searchMs)));
    QVERIFY2(heartbeat.longestStallMs() < std::max(100.0, searchMs / 4),
             qPrintable(QString("longest UI stall %1 ms during a %2 ms search").arg(heartbeat.longestStallMs()).arg(searchMs)));

    // Cancel right away: the search is stopped at its next placement, long before it could end.
    view_->moveStages({"enc0", "enc1", "enc2", "enc3", "bottleneck", "dec3", "dec2", "dec1", "dec0", "head"}, "cpu");
    const auto before = session_->placement();
    done.clear();
    QSignalSpy messages(session_.get(), &Session::message);
    view_->autoPlace();
    auto* cancel = view_->findChild<QPushButton*>("plannerCancel");
    QVERIFY(cancel->isVisible());
    QVERIFY(view_->findChild<QProgressBar*>("plannerBusy")->isVisible());
    QTest::mouseClick(cancel, Qt::LeftButton);
    QVERIFY(done.wait(30000));
    QCOMPARE(done.front().at(0).toBool(), false);
    QVERIFY(session_->placement() == before);
    QVERIFY(!messages.isEmpty());
    QVERIFY2(messages.back().at(0).toString().contains("cancelled"), qPrintable(messages.back().at(0).toString()));
    QTRY_VERIFY(!view_->planning());
    QVERIFY(!view_->findChild<QProgressBar*>("plannerBusy")->isVisible());
  }

  // Measure speed: a few training steps on this machine's CPU at the patch; the planner's request
  // then carries that speed for the CPU (not for the planning-only GPU), the summary says the
  // prediction uses it, and a new network drops it (it was measured with the old one).
  void measureSpeedFeedsThePrediction() {
    session_->createUNet(4, 3);
    view_->patchBox()->setValue(32);
    QTRY_VERIFY(!view_->planning());
    auto* summary = view_->findChild<QLabel*>("placementSummary");
    QTRY_VERIFY(summary->text().contains("default device speeds"));
    QSignalSpy measured(view_.get(), &PlacementView::speedsMeasured);
    QSignalSpy messages(session_.get(), &Session::message);
    QTest::mouseClick(view_->findChild<QPushButton*>("measureSpeed"), Qt::LeftButton);
    QVERIFY(view_->planning());  // on the worker: the busy bar and Cancel are up
    QVERIFY(measured.wait(120000));
    QCOMPARE(measured.front().at(0).toBool(), true);
    const auto* cpu = session_->measuredSpeed("cpu");
    QVERIFY(cpu);
    QVERIFY(cpu->flopsPerSecond > 0 && cpu->stepSeconds > 0);
    QCOMPARE((std::vector<std::int64_t>(cpu->patch.begin(), cpu->patch.end())), (std::vector<std::int64_t>{32, 32, 32}));
    QCOMPARE(session_->measuredSpeeds().size(), std::size_t(1));  // planning-only GPUs are not measured
    for (const auto& d : StageMemoryModel::request(*session_).devices)
      QCOMPARE(d.flopsPerSecond, d.name == "cpu" ? cpu->flopsPerSecond : 0.0);
    QVERIFY2(messages.back().at(0).toString().startsWith("Measured: cpu"), qPrintable(messages.back().at(0).toString()));
    QTRY_VERIFY2(summary->text().contains("measured: cpu"), qPrintable(summary->text()));
    const auto speeds = session_->measuredSpeeds();
    runedit::setAllPrecision(session_.get(), placement::Precision::BF16);  // measured in fp32: dropped
    QVERIFY(session_->measuredSpeeds().empty());
    QTRY_VERIFY(summary->text().contains("default device speeds"));
    session_->setMeasuredSpeeds(speeds);
    QTRY_VERIFY(summary->text().contains("measured: cpu"));
    session_->createUNet(4, 3);  // measured with another network: dropped
    QVERIFY(session_->measuredSpeeds().empty());
    QTRY_VERIFY(summary->text().contains("default device speeds"));
  }
};

SPLITSEG_UI_TEST_MAIN(PlacementDragDropTest)
#include "PlacementDragDropTest.moc"
