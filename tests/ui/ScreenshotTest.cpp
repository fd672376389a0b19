// Screenshots of the workstation as a user sees it, saved under build/screenshots/: the main
// window with the volume rendered, the placement view, live training charts and the review
// overlay. Each must show something: a blank (one-colour) image fails the test.
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/mainwindow/VolumeLoader.h"
#include "ui/placement/PlacementView.h"
#include "ui/placement/StageCard.h"
#include "ui/placement/DeviceColumn.h"
#include "ui/render/VolumeView3d.h"
#include "ui/review/ReviewPanel.h"
#include "ui/training/RankProcesses.h"
#include "ui/session/Session.h"
#include "ui/training/DeviceTimeline.h"
#include "ui/training/RunSettingsDialog.h"
#include "ui/training/TrainingCharts.h"

#include <QChartView>
#include "ui/training/TrainingPanel.h"

#include <QDockWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QLabel>
#include <QAbstractButton>
#include <QSettings>
#include <QStandardPaths>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDir>
#include <QFileInfo>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QUndoStack>

using namespace splitseg;
using namespace splitseg::ui;

class ScreenshotTest : public QObject {
  Q_OBJECT

  std::unique_ptr<MainWindow> window_;
  QString dir_ = SPLITSEG_SCREENSHOT_DIR;
  bool demo_ = false;

  void save(const QImage& image, const QString& name, double minStdDev = 8.0) {
    QVERIFY(!image.isNull());
    const QString path = dir_ + "/" + name;
    QVERIFY2(image.save(path), qPrintable(path));
    const double sd = test::greyStdDev(image);
    qInfo("%s: %dx%d, grey std dev %.1f", qPrintable(path), image.width(), image.height(), sd);
    QVERIFY2(sd > minStdDev, qPrintable(QString("%1 looks blank (std dev %2)").arg(name).arg(sd)));
  }

  // Software GL renders a shaded volume in about a second: wait for fresh frames.
  // The timeline alone, 900 pixels wide (the width the README shows it at), then back as it was.
  void saveTimeline(DeviceTimeline* timeline, const QString& name) {
    const QSize size = timeline->size();
    timeline->resize(900, timeline->sizeHint().height());
    save(timeline->grab().toImage(), name);
    timeline->resize(size);
  }

  void waitFrames(int frames = 2) {
    auto* v = window_->volumeView();
    const int start = v->framesRendered();
    v->update();
    QTRY_VERIFY_WITH_TIMEOUT(v->framesRendered() >= start + 1, 30000);
    QTest::qWait(500 * frames);
  }

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    QDir().mkpath(dir_);
    // Settings of their own: the recent-files list other tests filled does not show in the docs.
    QStandardPaths::setTestModeEnabled(true);
    QSettings().clear();
    window_ = std::make_unique<MainWindow>();
    window_->resize(1440, 900);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    // The real demo CT when the import step has run, else a phantom.
    const QString src = qEnvironmentVariable("SPLITSEG_SOURCE_DIR", ".");
    const QString demo = VolumeLoader::findDemo("image.nii.gz", src), bone = VolumeLoader::findDemo("bone.nii.gz", src);
    demo_ = !demo.isEmpty() && window_->openVolume(demo, bone);
    if (!demo_ && !VolumeLoader::findInVesaliusSample().isEmpty())
      demo_ = window_->openVolume(VolumeLoader::findInVesaliusSample());
    if (!demo_) window_->openPhantom("phantom for screenshots");
    qInfo("screenshots of %s", demo_ ? "the demo CT" : "a phantom");
  }
  void cleanupTestCase() { window_.reset(); }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void mainWindowWithVolume() {
    waitFrames(3);
    const QImage view3d = window_->volumeView()->grabFramebuffer();
    save(view3d, "volume-3d.png", 5.0);
    save(window_->grab().toImage(), "main-window.png");
  }

  void placementView() {
    window_->tabs()->setCurrentWidget(window_->placementView());
    auto* s = window_->session();
    // A what-if split of the seed U-Net: decoder on a 24 GiB planning GPU.
    const auto gpu = s->addPlanningDevice(std::int64_t(24) << 30);
    window_->placementView()->moveStages({"dec3", "dec2", "dec1", "dec0", "head"}, gpu);
    // Per-stage toggles: the two largest decoder stages in bf16, enc0 checkpointed.
    const run::RunSpec before = s->run();
    run::RunSpec run = before;
    run.precision.stages["dec1"] = run.precision.stages["dec0"] = placement::Precision::BF16;
    run.recompute.insert("enc0");
    s->setRun(run);
    QTest::qWait(300);
    QTRY_VERIFY(!window_->placementView()->planning());
    save(window_->placementView()->grab().toImage(), "placement.png");
    s->undoStack()->undo();
    s->setRun(before);
    s->removePlanningDevice(gpu);
  }

  // Measure speed: the predicted step with this machine's CPU speed, measured at the patch (48^3
  // here, to keep the test short), named in the summary.
  void placementMeasuredSpeed() {
    window_->tabs()->setCurrentWidget(window_->placementView());
    auto* view = window_->placementView();
    const int patch = view->patchBox()->value();
    view->patchBox()->setValue(48);
    QTRY_VERIFY(!view->planning());
    QSignalSpy measured(view, &PlacementView::speedsMeasured);
    QTest::mouseClick(view->findChild<QPushButton*>("measureSpeed"), Qt::LeftButton);
    QVERIFY(measured.wait(300000));
    QVERIFY(measured.front().at(0).toBool());
    QTRY_VERIFY(!view->planning());
    QTRY_VERIFY(view->findChild<QLabel*>("placementSummary")->text().contains("measured: cpu"));
    save(view->grab().toImage(), "placement-measured-speed.png");
    window_->session()->setMeasuredSpeeds({});
    view->patchBox()->setValue(patch);
    QTRY_VERIFY(!view->planning());
  }

  // The whole run in one form (Training tab, "All settings…").
  void runSettings() {
    RunSettingsDialog dialog(window_->session(), window_.get());
    dialog.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dialog));
    QVERIFY(dialog.width() <= 1440 && dialog.height() <= 900);  // fits the default window
    save(dialog.grab().toImage(), "run-settings.png");
  }

  // The default window (1440x900) holds every tab: no tab's minimum makes the window grow
  // (the Training tab's charts once needed 1144 pixels; they scroll inside the tab now).
  void everyTabFitsTheDefaultWindow() {
    for (int i = 0; i < window_->tabs()->count(); ++i) {
      window_->tabs()->setCurrentIndex(i);
      QTest::qWait(50);
      const QSize min = window_->minimumSizeHint();
      QVERIFY2(min.height() <= 900 && min.width() <= 1440,
               qPrintable(QString("%1 tab: the window needs at least %2x%3")
                              .arg(window_->tabs()->tabText(i)).arg(min.width()).arg(min.height())));
      QCOMPARE(window_->height(), 900);
    }
    window_->tabs()->setCurrentIndex(0);
  }

  // Room for the devices at the default size (1440x900): the CPU and four GPUs show side by side
  // without scrolling, nothing clipped (toolbar buttons, card texts); the other tabs get the
  // window back.
  void placementHasRoomForFiveDevices() {
    auto* s = window_->session();
    auto* view = window_->placementView();
    window_->tabs()->setCurrentWidget(window_->trainingPanel());
    QTest::qWait(100);
    auto* dock = window_->findChild<QDockWidget*>("tabDock");
    auto* dataDock = window_->findChild<QDockWidget*>("dataDock");
    QVERIFY(dock && dataDock);
    const int trainingWidth = dock->width();
    QVERIFY(dataDock->isVisible());
    std::vector<std::string> gpus;
    for (int gib : {24, 48, 80, 141}) gpus.push_back(s->addPlanningDevice(std::int64_t(gib) << 30));
    view->moveStages({"enc2", "enc3"}, gpus[0]);
    view->moveStages({"bottleneck"}, gpus[1]);
    view->moveStages({"dec3", "dec2"}, gpus[2]);
    view->moveStages({"dec1", "dec0", "head"}, gpus[3]);
    window_->tabs()->setCurrentWidget(view);
    QTest::qWait(300);
    QTRY_VERIFY(!view->planning());
    auto* scroll = view->findChild<QScrollArea*>();
    QVERIFY(scroll);
    QTRY_VERIFY(!scroll->horizontalScrollBar()->isVisible());
    const auto columns = view->findChildren<DeviceColumn*>();
    QCOMPARE(columns.size(), qsizetype(5));
    for (auto* c : columns) {
      const QRect inViewport(c->mapTo(scroll->viewport(), QPoint(0, 0)), c->size());
      QVERIFY2(scroll->viewport()->rect().contains(inViewport), c->device().c_str());
    }
    for (auto* b : view->findChildren<QAbstractButton*>()) {
      if (!b->isVisible() || qobject_cast<StageCard*>(b->parentWidget())) continue;
      QVERIFY2(b->width() >= b->sizeHint().width(), qPrintable(b->text()));
    }
    // Column heads: one-line labels wide enough, wrapped ones tall enough for their text.
    for (auto* c : columns)
      for (auto* l : c->findChildren<QLabel*>()) {
        if (!l->isVisible() || qobject_cast<StageCard*>(l->parentWidget())) continue;
        if (l->wordWrap())
          QTRY_VERIFY2(l->height() >= l->heightForWidth(l->width()),
                       qPrintable(QString("%1: %2 px high of %3").arg(l->text()).arg(l->height()).arg(l->heightForWidth(l->width()))));
        else
          QVERIFY2(l->width() >= l->sizeHint().width(), qPrintable(QString("%1: %2 px of %3").arg(l->text()).arg(l->width()).arg(l->sizeHint().width())));
      }
    for (auto* card : view->findChildren<StageCard*>())
      for (auto* l : card->findChildren<QLabel*>())
        if (l->isVisible())
          QVERIFY2(l->width() >= l->sizeHint().width(), qPrintable(QString("%1: %2 px of %3 in a %4 px card")
                                                                        .arg(l->text()).arg(l->width())
                                                                        .arg(l->sizeHint().width()).arg(card->width())));
    qInfo("five device columns at %dx%d: Model dock %d px (Data dock %s)", window_->width(), window_->height(),
          dock->width(), dataDock->isVisible() ? "shown" : "hidden while placing");
    save(window_->grab().toImage(), "placement-five-devices.png");
    window_->tabs()->setCurrentWidget(window_->trainingPanel());
    QTRY_VERIFY(dataDock->isVisible());
    QTRY_COMPARE(dock->width(), trainingWidth);
    window_->tabs()->setCurrentWidget(view);
    for (auto it = gpus.rbegin(); it != gpus.rend(); ++it) s->removePlanningDevice(*it);
    QTRY_VERIFY(!view->planning());
  }

  // Sharded stages: the full-resolution stages cut across two planning GPUs, the rest on the first.
  void placementSharded() {
    window_->tabs()->setCurrentWidget(window_->placementView());
    auto* s = window_->session();
    auto* view = window_->placementView();
    const auto a = s->addPlanningDevice(std::int64_t(16) << 30);
    const auto b = s->addPlanningDevice(std::int64_t(16) << 30);
    const int undoBefore = s->undoStack()->index();
    view->moveStages({"enc1", "enc2", "enc3", "bottleneck", "dec3", "dec2", "dec1"}, a);
    view->shardStages({"enc0", "dec0", "head"}, {a, b});
    QTest::qWait(300);
    QTRY_VERIFY(!view->planning());
    QVERIFY(s->placement().isSharded("dec0"));
    save(view->grab().toImage(), "placement-sharded.png");
    while (s->undoStack()->index() > undoBefore) s->undoStack()->undo();
    s->removePlanningDevice(b);
    s->removePlanningDevice(a);
  }

  void liveCharts() {
    auto* s = window_->session();
    auto* panel = window_->trainingPanel();
    window_->tabs()->setCurrentWidget(panel);
    panel->baseBox()->setValue(4);
    panel->depthBox()->setValue(3);
    s->createUNet(4, 3);
    panel->dataBox()->setCurrentIndex(panel->dataBox()->findData("phantom"));
    panel->patchBox()->setValue(16);
    panel->batchBox()->setValue(1);
    panel->stepsBox()->setValue(80);
    panel->learningRateBox()->setValue(0.003);
    panel->validateBox()->setValue(5);
    // Before the first run each chart says what will appear in it.
    QTest::qWait(400);
    QVERIFY(!panel->charts()->emptyHint(panel->charts()->lossView()).isEmpty());
    save(panel->grab().toImage(), "training-before-run.png", 4.0);
    QSignalSpy finished(panel, &TrainingPanel::runFinished);
    const int frames = window_->volumeView()->framesRendered();
    QTest::mouseClick(panel->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(300000));
    QCOMPARE(finished.front().at(1).toString(), QString());
    QTest::qWait(400);  // one more chart refresh
    save(panel->grab().toImage(), "training-charts.png");
    qInfo("longest UI-thread stall during the screenshot run: %.1f ms (3D frames rendered meanwhile: %d)",
          panel->lastStallMs(), window_->volumeView()->framesRendered() - frames);
  }

  // The device timeline of a run over three devices: encoders on the CPU, the bottleneck and dec1
  // (recomputed) on one GPU, dec0 sharded over two, the head on the second. The GPUs are stand-ins
  // running on the CPU here (SPLITSEG_STAND_INS); the lanes and spans are the engine's own record.
  void deviceTimeline() {
    auto* s = window_->session();
    auto* panel = window_->trainingPanel();
    window_->tabs()->setCurrentWidget(panel);
    qputenv("SPLITSEG_STAND_INS", "cuda:0=cpu,cuda:1=cpu");
    const auto devicesBefore = s->devices();
    auto devices = devicesBefore;
    for (const char* name : {"cuda:0", "cuda:1"}) {
      engine::DeviceInfo gpu;
      gpu.name = name;
      gpu.description = "stand-in GPU";
      gpu.totalBytes = gpu.freeBytes = std::int64_t{24} << 30;
      devices.push_back(gpu);
    }
    s->setDevices(devices);
    const auto placementBefore = s->placement();
    auto p = placementBefore;
    p.assign("bottleneck", "cuda:0");
    p.assign("dec1", "cuda:0");
    p.assign("dec0", "cuda:0+cuda:1");
    p.assign("head", "cuda:1");
    s->setPlacement(p);
    const auto runBefore = s->run();
    auto run = runBefore;
    run.recompute = {"dec1"};
    s->setRun(run);
    panel->patchBox()->setValue(32);
    panel->batchBox()->setValue(2);
    panel->stepsBox()->setValue(6);
    panel->validateBox()->setValue(0);
    QSignalSpy finished(panel, &TrainingPanel::runFinished);
    QTest::mouseClick(panel->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(300000));
    QCOMPARE(finished.front().at(1).toString(), QString());
    QTRY_COMPARE(panel->timeline()->stepsShown(), DeviceTimeline::kMaxSteps);
    QCOMPARE(panel->timeline()->lanes().size(), std::size_t{3});
    QTest::qWait(300);
    saveTimeline(panel->timeline(), "device-timeline.png");
    save(panel->grab().toImage(), "training-timeline.png");
    s->setPlacement(placementBefore);
    s->setRun(runBefore);
    s->setDevices(devicesBefore);
    qunsetenv("SPLITSEG_STAND_INS");
  }

  // Ranks: a rank process on this machine (r1:cpu) and a declared worker on another machine
  // (r2:cuda:0); then a real run over two ranks with 2 micro-batches, whose timeline shows the
  // GPipe schedule (rank 1 waits for rank 0's first micro-batch: the bubble).
  void ranksAndPipelineTimeline() {
    auto* s = window_->session();
    auto* view = window_->placementView();
    window_->tabs()->setCurrentWidget(view);
    const auto placementBefore = s->placement();
    const auto runBefore = s->run();
    QCOMPARE(s->addRank(RankHost{}), std::string("r1:cpu"));
    RankHost remote;
    remote.host = "gpu-node-2";
    remote.device = "cuda:0";
    remote.totalBytes = std::int64_t{80} << 30;
    QCOMPARE(s->addRank(remote), std::string("r2:cuda:0"));
    view->moveStages({"dec1", "dec0", "head"}, "r1:cpu");
    view->moveStages({"bottleneck"}, "r2:cuda:0");
    QTest::qWait(300);
    QTRY_VERIFY(!view->planning());
    save(view->grab().toImage(), "placement-ranks.png");

    view->moveStages({"bottleneck"}, "cpu");
    auto* panel = window_->trainingPanel();
    window_->tabs()->setCurrentWidget(panel);
    auto run = s->run();
    run.microBatches = 2;
    s->setRun(run);
    panel->patchBox()->setValue(32);
    panel->batchBox()->setValue(2);
    panel->stepsBox()->setValue(5);
    panel->validateBox()->setValue(0);
    QSignalSpy finished(panel, &TrainingPanel::runFinished);
    QTest::mouseClick(panel->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(300000));
    QCOMPARE(finished.front().at(1).toString(), QString());
    QTRY_COMPARE(panel->timeline()->stepsShown(), DeviceTimeline::kMaxSteps);
    QCOMPARE(panel->timeline()->lanes(), (std::vector<std::string>{"r0:cpu", "r1:cpu"}));
    QTest::qWait(300);
    saveTimeline(panel->timeline(), "timeline-ranks.png");
    // Every rank's memory beside the planner's peak for it.
    QVERIFY(panel->charts()->plannedMiB("r1:cpu") > 0);
    save(panel->charts()->memoryView()->grab().toImage(), "memory-ranks.png");

    // Review over the same ranks: rank 1 (a splitseg-cli worker) runs the decoders on each window.
    auto* review = window_->reviewPanel();
    window_->tabs()->setCurrentWidget(review);
    review->modeBox()->setCurrentIndex(review->modeBox()->findData("window"));
    review->windowBox()->setValue(64);
    QSignalSpy inferred(review, &ReviewPanel::inferenceFinished);
    QTest::mouseClick(review->runButton(), Qt::LeftButton);
    QCOMPARE(review->rankProcesses()->running(), 1);
    QVERIFY(inferred.wait(120000));
    QVERIFY2(inferred.front().at(0).toBool(), qPrintable(review->summaryLabel()->text()));
    QVERIFY2(review->progressBar()->format().contains("over 2 ranks"), qPrintable(review->progressBar()->format()));
    waitFrames(3);
    save(window_->grab().toImage(), "review-ranks.png");
    QTRY_COMPARE_WITH_TIMEOUT(review->rankProcesses()->running(), 0, 10000);
    s->removeRank(2);
    s->removeRank(1);
    s->setPlacement(placementBefore);
    s->setRun(runBefore);
  }

  void reviewOverlay() {
    auto* s = window_->session();
    window_->tabs()->setCurrentWidget(window_->reviewPanel());
    const auto truth = s->groundTruth();
    QVERIFY(truth);
    // A prediction with known errors: the ground truth shifted by a few voxels, so false
    // positives and negatives show along one side.
    Volume pred = *truth;
    const auto& n = pred.size();
    for (std::int64_t z = 0; z < n[2]; ++z)
      for (std::int64_t y = 0; y < n[1]; ++y)
        for (std::int64_t x = 0; x < n[0]; ++x) pred.at(x, y, z) = x >= 4 ? truth->at(x - 4, y, z) : 0.0f;
    s->setPrediction(std::make_shared<Volume>(pred));
    auto* review = window_->reviewPanel();
    review->displayBox()->setCurrentIndex(review->displayBox()->findData("errors"));
    waitFrames(3);
    save(window_->grab().toImage(), "review-overlay.png");
  }

  // The Memory row: the planner's peak for a review before it runs, at the largest window that fits.
  void reviewMemory() {
    auto* s = window_->session();
    // Every stage on this machine's CPU (an earlier screenshot leaves stages on stand-in GPUs).
    const auto placementBefore = s->placement();
    auto restore = qScopeGuard([&] { s->setPlacement(placementBefore); });
    s->setPlacement(placement::Placement::uniform(s->stageNames(), "cpu"));
    auto* review = window_->reviewPanel();
    window_->tabs()->setCurrentWidget(review);
    review->modeBox()->setCurrentIndex(review->modeBox()->findData("window"));
    review->windowBox()->setValue(128);
    QVERIFY2(review->memoryLabel()->text().contains("planned peak cpu"), qPrintable(review->memoryLabel()->text()));
    // As nnU-Net predicts: mirrored along x, y, z, each label's largest region kept.
    auto* mirror = review->findChild<QComboBox*>("reviewMirror");
    auto* keep = review->findChild<QCheckBox*>("reviewKeepLargest");
    QVERIFY(mirror && keep);
    const auto unmirrored = review->memoryLabel()->text();
    mirror->setCurrentIndex(mirror->findData("xyz"));
    keep->setChecked(true);
    auto plain = qScopeGuard([mirror, keep] {
      mirror->setCurrentIndex(0);
      keep->setChecked(false);
    });
    QVERIFY(review->memoryLabel()->text() != unmirrored);
    // Then the largest window the planner says fits this host.
    QSignalSpy fitted(review, &ReviewPanel::fitWindowDone);  // found on the planner's worker
    QTest::mouseClick(review->fitWindowButton(), Qt::LeftButton);
    QVERIFY(fitted.wait(60000));
    QVERIFY2(review->memoryLabel()->text().contains("largest") && !review->memoryLabel()->text().contains("does not fit"),
             qPrintable(review->memoryLabel()->text()));
    waitFrames(3);
    save(window_->grab().toImage(), "review-memory.png");
  }
};

SPLITSEG_UI_TEST_MAIN(ScreenshotTest)
#include "ScreenshotTest.moc"
