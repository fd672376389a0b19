// Review on a phantom with known ground truth: a prediction that misses known voxels shows
// the Dice computed independently here; a perfect one shows Dice 1 and HD95 0; inference
// through the real engine produces a label map in the image's geometry; with stages placed on a
// second rank, the panel starts it (splitseg-cli worker) and predicts the same labels over ranks.
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "ui/review/ReviewPanel.h"
#include "ui/session/RankHost.h"
#include "ui/training/RankProcesses.h"
#include "core/metrics/SegmentationMetrics.h"
#include "core/model/StagedNetwork.h"
#include "core/planner/MemoryPlanner.h"
#include "core/postprocess/LargestComponent.h"
#include "ui/session/Session.h"
#include "tests/support/PlannerGaps.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QUndoStack>

#include <torch/torch.h>

using namespace splitseg;
using namespace splitseg::ui;

namespace {
// Mode, window and devices as they were when the returned guard goes (tests change them).
auto keepSettings(ReviewPanel* panel, Session* session) {
  return qScopeGuard([panel, session, mode = panel->modeBox()->currentData().toString(),
                      window = panel->windowBox()->value(), devices = session->devices()] {
    session->setDevices(devices);
    panel->modeBox()->setCurrentIndex(panel->modeBox()->findData(mode));
    panel->windowBox()->setValue(window);
  });
}
} // namespace

class ReviewPanelTest : public QObject {
  Q_OBJECT

  std::unique_ptr<Session> session_;
  std::unique_ptr<ReviewPanel> panel_;
  data::Phantom phantom_;
  bool headScaled_ = false;

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    data::PhantomOptions o;
    o.size = {48, 40, 32};
    o.spacing = {1.0, 1.0, 2.0};
    phantom_ = data::makePhantom(o);
    session_ = std::make_unique<Session>();
    torch::manual_seed(7);  // the same untrained weights every run (inferenceOverTwoLocalRanks counts labels)
    session_->createUNet(4, 3);
    session_->setImage(std::make_shared<Volume>(phantom_.image), "phantom");
    session_->setGroundTruth(std::make_shared<Volume>(phantom_.label), "phantom label");
    panel_ = std::make_unique<ReviewPanel>(session_.get());
    panel_->resize(480, 640);
    panel_->show();
    QVERIFY(QTest::qWaitForWindowExposed(panel_.get()));
  }
  void cleanupTestCase() {
    panel_.reset();
    session_.reset();
  }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void perfectPredictionHasDiceOne() {
    QCOMPARE(panel_->progressBar()->format(), QString("no prediction yet"));
    session_->setPrediction(std::make_shared<Volume>(phantom_.label));
    // Metrics of a prediction are on screen: the bar must not say there is none.
    QCOMPARE(panel_->progressBar()->format(), QString("prediction shown"));
    QCOMPARE(panel_->metricsTable()->rowCount(), 1);
    QCOMPARE(panel_->metricsTable()->item(0, 3)->text(), QString("1.0000"));
    QCOMPARE(panel_->metricsTable()->item(0, 4)->text(), QString("0.00"));
  }

  void partialPredictionShowsExpectedDice() {
    // Drop the foreground in the left half: Dice = 2 |P∩G| / (|P| + |G|) with P ⊂ G.
    Volume pred = phantom_.label;
    std::int64_t truth = 0, kept = 0;
    for (std::int64_t z = 0; z < pred.size()[2]; ++z)
      for (std::int64_t y = 0; y < pred.size()[1]; ++y)
        for (std::int64_t x = 0; x < pred.size()[0]; ++x) {
          const bool fg = phantom_.label.at(x, y, z) > 0.5f;
          truth += fg;
          if (x < pred.size()[0] / 2) pred.at(x, y, z) = 0;
          kept += pred.at(x, y, z) > 0.5f;
        }
    QVERIFY(kept > 0 && kept < truth);
    const double expected = 2.0 * double(kept) / double(kept + truth);
    QSignalSpy overlay(panel_.get(), &ReviewPanel::overlayChanged);
    session_->setPrediction(std::make_shared<Volume>(pred));
    QCOMPARE(panel_->metricsTable()->item(0, 3)->text(), QString::number(expected, 'f', 4));
    QCOMPARE(panel_->metrics().size(), std::size_t(1));
    QVERIFY(std::abs(panel_->metrics().front().dice - expected) < 1e-9);
    const double hd = panel_->metricsTable()->item(0, 4)->text().toDouble();
    QVERIFY(hd > 0);
    QVERIFY(!overlay.isEmpty());

    // The error view: the cut-off half is false negative (3), nothing is false positive (2).
    panel_->displayBox()->setCurrentIndex(panel_->displayBox()->findData("errors"));
    QVERIFY(panel_->showingErrors());
    const auto errors = metrics::SegmentationMetrics::errorMap(pred, phantom_.label);
    std::int64_t fn = 0, fp = 0;
    for (float v : errors.voxels()) { fn += v == 3; fp += v == 2; }
    QCOMPARE(fn, truth - kept);
    QCOMPARE(fp, std::int64_t(0));
    panel_->displayBox()->setCurrentIndex(panel_->displayBox()->findData("prediction"));
  }

  void hd95OfAShiftIsTheShift() {
    // A label shifted by 3 voxels along x (1 mm spacing): every surface point is at most 3 mm away.
    Volume shifted = phantom_.label;
    for (std::int64_t z = 0; z < shifted.size()[2]; ++z)
      for (std::int64_t y = 0; y < shifted.size()[1]; ++y)
        for (std::int64_t x = 0; x < shifted.size()[0]; ++x)
          shifted.at(x, y, z) = x >= 3 ? phantom_.label.at(x - 3, y, z) : 0.0f;
    const double hd = metrics::SegmentationMetrics::hd95(shifted, phantom_.label, 1);
    QVERIFY2(hd > 1.0 && hd <= 3.0 + 1e-9, qPrintable(QString::number(hd)));
  }

  // The Memory row plans the review with the settings shown: the windows the volume is cut into,
  // each device's peak, and a red "does not fit" when a device is too small for it.
  void memoryPlanFollowsSettings() {
    const auto devicesBefore = session_->devices();
    const auto restore = keepSettings(panel_.get(), session_.get());
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("window"));
    panel_->windowBox()->setValue(32);
    // 48 x 40 x 32 voxels (x, y, z) in 32^3 windows at half overlap: 2 x 2 x 1 windows.
    QVERIFY2(panel_->memoryLabel()->text().startsWith("4 windows of 32×32×32 · planned peak cpu "),
             qPrintable(panel_->memoryLabel()->text()));
    QVERIFY(!panel_->memoryLabel()->text().contains("does not fit"));
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("whole"));
    QVERIFY2(panel_->memoryLabel()->text().startsWith("one pass of 48×40×32"), qPrintable(panel_->memoryLabel()->text()));
    auto small = devicesBefore;
    for (auto& d : small)
      if (d.name == "cpu") d.totalBytes = std::int64_t{1} << 20;
    session_->setDevices(small);
    QVERIFY2(panel_->memoryLabel()->text().contains("does not fit: cpu short by"), qPrintable(panel_->memoryLabel()->text()));
    QVERIFY(panel_->memoryLabel()->styleSheet().contains("color"));
  }

  // "Largest that fits" sets the largest cubic window whose pass fits: with room to spare the
  // whole volume; on a CPU with room for a 32^3 window's pass, a window that fits and whose next
  // size does not.
  void fitWindowFindsTheLargest() {
    const auto devicesBefore = session_->devices();
    const auto restore = keepSettings(panel_.get(), session_.get());
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("window"));
    panel_->windowBox()->setValue(16);
    // The search runs on the planner's worker: the button waits disabled for its answer.
    QSignalSpy fitDone(panel_.get(), &ReviewPanel::fitWindowDone);
    QTest::mouseClick(panel_->fitWindowButton(), Qt::LeftButton);
    QVERIFY(panel_->fittingWindow() && !panel_->fitWindowButton()->isEnabled());
    QVERIFY(fitDone.wait(60000));
    QVERIFY(panel_->fitWindowButton()->isEnabled());
    QCOMPARE(panel_->windowBox()->value(), 48);  // the volume's longest side (48 x 40 x 32)
    QVERIFY2(panel_->memoryLabel()->text().contains("the volume fits in one"), qPrintable(panel_->memoryLabel()->text()));

    panel_->windowBox()->setValue(32);
    std::array<std::int64_t, 3> grid{};
    const auto plan32 = planner::MemoryPlanner(*session_->structure()).plan(panel_->inferenceRequest(&grid));
    auto tight = devicesBefore;
    for (auto& d : tight)
      if (d.name == "cpu") d.totalBytes = plan32.devices.front().peak + 1024;
    session_->setDevices(tight);
    QVERIFY2(!panel_->memoryLabel()->text().contains("does not fit"), qPrintable(panel_->memoryLabel()->text()));
    panel_->windowBox()->setValue(16);
    QTest::mouseClick(panel_->fitWindowButton(), Qt::LeftButton);
    QVERIFY(fitDone.wait(60000));
    const int fitted = panel_->windowBox()->value();
    QVERIFY2(fitted >= 32 && fitted < 48, qPrintable(QString::number(fitted)));
    const QString atFit = panel_->memoryLabel()->text();
    QVERIFY2(!atFit.contains("does not fit") && atFit.contains("largest that fits; "), qPrintable(atFit));
    // The note holds only while what the search saw holds: other devices, no note.
    session_->setDevices(devicesBefore);
    QVERIFY2(!panel_->memoryLabel()->text().contains("largest"), qPrintable(panel_->memoryLabel()->text()));
    session_->setDevices(tight);
    const int step = static_cast<int>(session_->structure()->sizeDivisor);
    panel_->windowBox()->setValue(fitted + step);
    QVERIFY2(panel_->memoryLabel()->text().contains("does not fit"), qPrintable(panel_->memoryLabel()->text()));
    QVERIFY(!panel_->memoryLabel()->text().contains("largest that fits"));
  }

  // The window the search found is one undo step; an edit while it searches cancels it (its
  // answer, for the settings before the edit, would overwrite the edit).
  void fitWindowIsOneUndoStepAnEditCancels() {
    const auto restore = keepSettings(panel_.get(), session_.get());
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("window"));
    panel_->windowBox()->setValue(16);
    auto* stack = session_->undoStack();
    const int count = stack->count();
    QSignalSpy fitDone(panel_.get(), &ReviewPanel::fitWindowDone);
    QTest::mouseClick(panel_->fitWindowButton(), Qt::LeftButton);
    QVERIFY(fitDone.wait(60000));
    QCOMPARE(fitDone.takeFirst().at(0).toBool(), true);
    QCOMPARE(panel_->windowBox()->value(), 48);
    QCOMPARE(stack->count(), count + 1);
    QCOMPARE(stack->undoText(), QString("set window to 48³"));
    stack->undo();
    QCOMPARE(panel_->windowBox()->value(), 16);
    QCOMPARE(session_->run().window[0], std::int64_t(16));
    stack->redo();
    QCOMPARE(panel_->windowBox()->value(), 48);

    panel_->windowBox()->setValue(16);
    QTest::mouseClick(panel_->fitWindowButton(), Qt::LeftButton);
    QVERIFY(panel_->fittingWindow());
    panel_->windowBox()->setValue(32);  // before the answer: no event has been handled yet
    QCOMPARE(fitDone.size(), 1);
    QCOMPARE(fitDone.takeFirst().at(0).toBool(), false);
    QVERIFY(!panel_->fittingWindow() && panel_->fitWindowButton()->isEnabled());
    QTest::qWait(500);  // the cancelled search's answer, if any, is dropped
    QVERIFY(fitDone.isEmpty());
    QCOMPARE(panel_->windowBox()->value(), 32);
    QCOMPARE(session_->run().window[0], std::int64_t(32));
  }

  void inferenceThroughTheEngine() {
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("window"));
    panel_->windowBox()->setValue(32);
    QSignalSpy done(panel_.get(), &ReviewPanel::inferenceFinished);
    QTest::mouseClick(panel_->runButton(), Qt::LeftButton);
    QVERIFY(done.wait(120000));
    QCOMPARE(done.front().at(0).toBool(), true);
    const auto pred = session_->prediction();
    QVERIFY(pred);
    QVERIFY(pred->geometry().sameGrid(phantom_.image.geometry()));
    QVERIFY(panel_->metricsTable()->item(0, 3)->text() != QString("—"));
    // The Memory row shows what the run measured beside the plan, until a setting changes.
    QVERIFY2(panel_->memoryLabel()->text().contains(" · measured tensors cpu "), qPrintable(panel_->memoryLabel()->text()));
    panel_->windowBox()->setValue(48);
    QVERIFY2(!panel_->memoryLabel()->text().contains("measured"), qPrintable(panel_->memoryLabel()->text()));
    panel_->windowBox()->setValue(32);
  }

  // Mirroring x, y, z plans more host memory (the flipped windows, the logits' sum) and predicts
  // other labels; keeping each label's largest region leaves those labels with the voxels outside
  // it set to background and one region per label.
  void mirroringAndLargestRegion() {
    auto* mirror = panel_->findChild<QComboBox*>("reviewMirror");
    auto* keep = panel_->findChild<QCheckBox*>("reviewKeepLargest");
    QVERIFY(mirror && keep && keep->isEnabled());
    const auto restore = qScopeGuard([mirror, keep] {
      mirror->setCurrentIndex(0);
      keep->setChecked(false);
    });
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData("window"));
    panel_->windowBox()->setValue(32);
    const planner::MemoryPlanner planner(*session_->structure());
    const auto plain = planner.plan(panel_->inferenceRequest());
    const auto predict = [this]() -> std::shared_ptr<const Volume> {
      QSignalSpy done(panel_.get(), &ReviewPanel::inferenceFinished);
      QTest::mouseClick(panel_->runButton(), Qt::LeftButton);
      if (!done.wait(120000) || !done.front().at(0).toBool()) return nullptr;
      return session_->prediction();
    };
    const auto unmirrored = predict();
    mirror->setCurrentIndex(mirror->findData("xyz"));
    const auto request = panel_->inferenceRequest();
    QVERIFY(request.mirror);
    QVERIFY(planner.plan(request).devices.front().peak > plain.devices.front().peak);
    const auto mirrored = predict();
    QVERIFY(unmirrored && mirrored);
    QVERIFY(mirrored->voxels() != unmirrored->voxels());
    keep->setChecked(true);
    const auto kept = predict();
    QVERIFY(kept);
    std::int64_t removed = 0;
    for (std::size_t i = 0; i < kept->voxels().size(); ++i) {
      if (kept->voxels()[i] == mirrored->voxels()[i]) continue;
      QCOMPARE(kept->voxels()[i], 0.0f);
      ++removed;
    }
    Volume check = *kept;
    for (const auto& c : postprocess::keepLargestComponents(check)) QCOMPARE(c.removed, std::int64_t{0});
    qInfo("largest region kept: %lld voxel(s) removed", static_cast<long long>(removed));
    if (removed > 0) QVERIFY2(panel_->findChild<QProgressBar*>()->format().contains("removed"), qPrintable(panel_->findChild<QProgressBar*>()->format()));
  }

  // The decoders on rank 1, or every stage cut in two slabs over ranks 0 and 1: the panel starts
  // rank 1 as a splitseg-cli worker and predicts the labels one process predicts; the worker
  // exits by itself. Rows run on the whole volume and with a sliding window.
  void inferenceOverTwoLocalRanks_data() {
    QTest::addColumn<bool>("sharded");
    QTest::addColumn<QString>("mode");
    QTest::newRow("pipeline, window") << false << "window";
    QTest::newRow("every stage sharded, whole volume") << true << "whole";
    QTest::newRow("every stage sharded, window") << true << "window";
  }
  void inferenceOverTwoLocalRanks() {
    QFETCH(bool, sharded);
    QFETCH(QString, mode);
    if (!headScaled_) {
      // Untrained (and unseeded), the network gives almost every voxel the same label, its head's
      // biases deciding; without them and with larger weights the features decide, so the labels
      // vary and a wrong slab or window shows as differing voxels.
      torch::NoGradGuard noGrad;
      for (auto& p : session_->network()->root().named_parameters())
        if (p.key().rfind("head", 0) == 0) {
          if (p.key().find("bias") != std::string::npos) p.value().zero_();
          else p.value().mul_(40);
        }
      headScaled_ = true;
    }
    panel_->modeBox()->setCurrentIndex(panel_->modeBox()->findData(mode));
    panel_->windowBox()->setValue(32);
    const auto oneProcess = session_->placement();
    // A failed row leaves no rank behind for the next.
    const auto restore = qScopeGuard([&] {
      if (session_->device("r1:cpu")) session_->removeRank(1);
      session_->setPlacement(oneProcess);
    });
    QSignalSpy done(panel_.get(), &ReviewPanel::inferenceFinished);
    QTest::mouseClick(panel_->runButton(), Qt::LeftButton);
    QVERIFY(done.wait(120000));
    QCOMPARE(done.takeFirst().at(0).toBool(), true);
    const auto expected = session_->prediction();
    QVERIFY(expected);

    QCOMPARE(session_->addRank(RankHost{}), std::string("r1:cpu"));
    auto p = oneProcess;
    for (const auto& s : session_->stageNames())
      if (sharded) p.assign(s, "r0:cpu+r1:cpu");
      else if (s.rfind("dec", 0) == 0) p.assign(s, "r1:cpu");
    session_->setPlacement(p);
    QCOMPARE(session_->placement().rankCount(), 2);
    QTest::mouseClick(panel_->runButton(), Qt::LeftButton);
    QCOMPARE(panel_->rankProcesses()->running(), 1);
    QVERIFY(done.wait(120000));
    QVERIFY2(done.front().at(0).toBool(), qPrintable(panel_->summaryLabel()->text()));
    const auto got = session_->prediction();
    QVERIFY(got && got != expected);
    QVERIFY(got->geometry().sameGrid(expected->geometry()));
    std::size_t differing = 0, foreground = 0;
    for (std::size_t i = 0; i < got->voxels().size(); ++i) {
      differing += got->voxels()[i] != expected->voxels()[i];
      foreground += expected->voxels()[i] != 0;
    }
    qInfo("%zu of %zu voxels differ from one process (%zu labelled)", differing, got->voxels().size(), foreground);
    QCOMPARE(differing, std::size_t(0));
    QVERIFY2(foreground > got->voxels().size() / 10 && foreground < got->voxels().size() * 9 / 10,
             "the labels hardly vary: a comparison of them shows little");
    QTRY_COMPARE_WITH_TIMEOUT(panel_->rankProcesses()->running(), 0, 10000);  // rank 1 ended by itself
    QVERIFY(session_->rankProblem(1).isEmpty());
    // Every rank's measured peak beside its plan, rank 1's from its own process.
    // Rank 0's devices named as the placement names them ("cpu" beside "r1:cpu", or "r0:cpu").
    const QString memory = panel_->memoryLabel()->text();
    const QString measured = memory.mid(memory.indexOf(" · measured tensors "));
    QVERIFY2(memory.contains(" · measured tensors ") && measured.contains("r1:cpu ") &&
                 measured.contains(sharded ? "r0:cpu " : "cpu "),
             qPrintable(memory));
    qInfo("%s", qPrintable(memory));
    // Each within 5% of its plan (plus the text's 0.1 MiB rounding); rank 0 must compute with the
    // share of the workstation's cores it was planned with.
    const QRegularExpression pair(R"(([\w:]+) ([\d.]+) MiB \(plan ([\d.]+) MiB\))");
    int pairs = 0;
    for (auto it = pair.globalMatch(measured); it.hasNext(); ++pairs) {
      const auto m = it.next();
      const double got = m.captured(2).toDouble(), plan = m.captured(3).toDouble();
      SPLITSEG_SKIP_OPEN_AVX2_GAP(std::abs(got - plan) > 0.05 * plan + 0.1, m.captured(0),
                                  "every stage sharded, whole volume", "every stage sharded, window");
      QVERIFY2(std::abs(got - plan) <= 0.05 * plan + 0.1, qPrintable(m.captured(0)));
    }
    QCOMPARE(pairs, 2);
  }
};

SPLITSEG_UI_TEST_MAIN(ReviewPanelTest)
#include "ReviewPanelTest.moc"
