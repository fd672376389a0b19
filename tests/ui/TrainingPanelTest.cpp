// A tiny training started from the Training panel reports progress, fills the charts and
// finishes; Stop ends a long run within a step; an out-of-memory step is reported naming
// the stage and device and the panel can train again.
#include "tests/ui/UiTestSupport.h"

#include "ui/session/Session.h"
#include "ui/training/DecimatedSeries.h"
#include "ui/training/TrainingCharts.h"
#include "ui/training/StallMeter.h"
#include "ui/training/TrainingPanel.h"

#include <QComboBox>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QSpinBox>
#include <QThread>

using namespace splitseg;
using namespace splitseg::ui;

class TrainingPanelTest : public QObject {
  Q_OBJECT

  std::unique_ptr<Session> session_;
  std::unique_ptr<TrainingPanel> panel_;

  void configure(int steps, int validateEvery) {
    panel_->dataBox()->setCurrentIndex(panel_->dataBox()->findData("phantom"));
    panel_->patchBox()->setValue(16);
    panel_->batchBox()->setValue(1);
    panel_->stepsBox()->setValue(steps);
    panel_->validateBox()->setValue(validateEvery);
    panel_->budgetBox()->setValue(0);
  }

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    session_ = std::make_unique<Session>();
    session_->createUNet(4, 3);
    panel_ = std::make_unique<TrainingPanel>(session_.get());
    panel_->resize(520, 820);
    panel_->show();
    QVERIFY(QTest::qWaitForWindowExposed(panel_.get()));
  }
  void cleanupTestCase() {
    panel_.reset();
    session_.reset();
  }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void tinyRunFinishes() {
    configure(6, 3);
    // One stage in bf16 (the placement view's card toggle does the same): the run takes it.
    auto run = session_->run();
    run.precision.stages["dec0"] = placement::Precision::BF16;
    session_->setRun(run);
    QSignalSpy steps(panel_.get(), &TrainingPanel::stepDone);
    QSignalSpy finished(panel_.get(), &TrainingPanel::runFinished);
    QTest::mouseClick(panel_->startButton(), Qt::LeftButton);
    QVERIFY(panel_->running());
    QVERIFY(session_->busy());
    QVERIFY(finished.wait(180000));
    QCOMPARE(finished.front().at(0).toBool(), false);          // not stopped
    QCOMPARE(finished.front().at(1).toString(), QString());    // no error
    QCOMPARE(steps.size(), 6);
    QCOMPARE(steps.back().at(0).toLongLong(), 6);
    QCOMPARE(panel_->lastRunPrecision(), std::string("bf16:dec0"));
    QCOMPARE(panel_->progressBar()->value(), 6);
    auto* charts = panel_->charts();
    QCOMPARE(charts->trainLoss().size(), 6);
    QCOMPARE(charts->trainLoss().shownPoints(), 6);
    QCOMPARE(charts->valDice().size(), 2);
    QVERIFY(charts->deviceMemory("cpu"));
    QCOMPARE(charts->deviceMemory("cpu")->size(), 6);
    QVERIFY(charts->deviceMemory("cpu")->maxY() > 0);
    QVERIFY(charts->hostMemory().maxY() > 0);
    QVERIFY(!session_->busy());
    qInfo("UI-thread stall during the tiny run: longest %.1f ms, 99th percentile %.1f ms", panel_->lastStallMs(),
          panel_->lastStallP99Ms());
    QVERIFY(panel_->lastStallP99Ms() <= panel_->lastStallMs());
    QVERIFY2(panel_->lastStallMs() < 500, qPrintable(QString::number(panel_->lastStallMs())));
  }

  void stallMeterSeesABlockedThread() {
    StallMeter meter(nullptr, 5);
    meter.start();
    QTest::qWait(150);
    QThread::msleep(120);  // the UI thread does nothing else: one stall of ~115 ms
    QTest::qWait(150);
    meter.stop();
    QVERIFY2(meter.beats() > 10, qPrintable(QString::number(meter.beats())));
    QVERIFY2(meter.longestStallMs() >= 100, qPrintable(QString::number(meter.longestStallMs())));
    QCOMPARE(meter.percentileStallMs(100), meter.longestStallMs());
    QVERIFY2(meter.percentileStallMs(50) < 50, qPrintable(QString::number(meter.percentileStallMs(50))));
  }

  void stopEndsWithinAStep() {
    configure(100000, 0);
    QSignalSpy steps(panel_.get(), &TrainingPanel::stepDone);
    QSignalSpy finished(panel_.get(), &TrainingPanel::runFinished);
    QTest::mouseClick(panel_->startButton(), Qt::LeftButton);
    QVERIFY(steps.wait(120000));
    QTRY_VERIFY_WITH_TIMEOUT(steps.size() >= 2, 120000);
    // Pause and resume on the way: the run keeps going afterwards.
    QTest::mouseClick(panel_->pauseButton(), Qt::LeftButton);
    QCOMPARE(panel_->pauseButton()->text(), QString("Resume"));
    QTest::mouseClick(panel_->pauseButton(), Qt::LeftButton);
    const int atResume = steps.size();
    QTRY_VERIFY_WITH_TIMEOUT(steps.size() > atResume, 120000);
    const int atStop = steps.size();
    QTest::mouseClick(panel_->stopButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.front().at(0).toBool(), true);  // stopped
    // At most the step already running when Stop was pressed completes. Steps arrive as queued
    // signals, so one step may also have finished just before the click with its signal still in
    // the queue: up to two more, never the thousands a run that ignored Stop would go on with.
    QVERIFY2(steps.size() <= atStop + 2, qPrintable(QString("%1 steps after stop").arg(steps.size() - atStop)));
    QVERIFY(steps.back().at(0).toLongLong() < 100000);
    qInfo("longest UI-thread stall during the long run: %.1f ms", panel_->lastStallMs());
  }

  // Stop pressed before the worker thread has picked the run up is honoured: the token is
  // re-armed on the UI thread at Start, not when the worker begins (which would erase the Stop).
  // The worker thread is held busy so that Stop lands before run() starts.
  void stopBeforeTheWorkerStartsIsHonoured() {
    configure(100000, 0);
    QSemaphore hold;
    QObject blocker;
    blocker.moveToThread(panel_->workerThread());
    QMetaObject::invokeMethod(&blocker, [&hold] { hold.acquire(); }, Qt::QueuedConnection);
    QSignalSpy steps(panel_.get(), &TrainingPanel::stepDone);
    QSignalSpy finished(panel_.get(), &TrainingPanel::runFinished);
    QTest::mouseClick(panel_->startButton(), Qt::LeftButton);
    QTest::mouseClick(panel_->stopButton(), Qt::LeftButton);
    hold.release();  // now the worker runs the queued run()
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.front().at(0).toBool(), true);
    QVERIFY2(steps.size() <= 1, qPrintable(QString("%1 steps after an early stop").arg(steps.size())));
    QMetaObject::invokeMethod(&blocker, [&blocker] { blocker.moveToThread(QCoreApplication::instance()->thread()); },
                              Qt::BlockingQueuedConnection);
  }

  void outOfMemoryIsReportedAndSessionContinues() {
    configure(3, 0);
    panel_->budgetBox()->setValue(1);  // 1 MiB of CPU memory: the first stage cannot fit
    QSignalSpy finished(panel_.get(), &TrainingPanel::runFinished);
    QTest::mouseClick(panel_->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    const QString error = finished.front().at(1).toString();
    QVERIFY2(error.contains("cpu"), qPrintable(error));
    QVERIFY2(error.contains("enc") || error.contains("bottleneck") || error.contains("dec") || error.contains("head"),
             qPrintable(error));
    QCOMPARE(panel_->lastError(), error);
    QVERIFY(!session_->busy());
    // The session goes on: a run without the budget works.
    configure(2, 0);
    finished.clear();
    QTest::mouseClick(panel_->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.front().at(1).toString(), QString());
  }

  void decimationKeepsChartsSmall() {
    QLineSeries series;
    DecimatedSeries d(&series, 600);
    for (int i = 0; i < 100000; ++i) d.append(i, std::sin(i * 0.01) + (i == 54321 ? 10 : 0));
    d.flush();
    QVERIFY(d.shownPoints() <= 2400);
    // The spike survives decimation.
    double maxY = 0;
    for (const auto& p : series.points()) maxY = std::max(maxY, p.y());
    QVERIFY(maxY > 9);
  }
};

SPLITSEG_UI_TEST_MAIN(TrainingPanelTest)
#include "TrainingPanelTest.moc"
