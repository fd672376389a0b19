// Opening a volume from the window reads it on a worker thread: the call returns at once, the
// status bar says "Loading <file>…" with a busy bar, the UI thread keeps beating while ITK
// reads, and the volume arrives on the UI thread. A broken file leaves the open volume as it
// was; a second open while one is loading supersedes it (the latest request wins).
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "core/io/VolumeWriter.h"
#include "ui/mainwindow/AsyncVolumeLoader.h"
#include "ui/mainwindow/DataPanel.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/session/Session.h"
#include "ui/training/StallMeter.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProgressBar>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>

#include <cstdint>
#include <random>

using namespace splitseg;
using namespace splitseg::ui;

class VolumeLoadingTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;  // removed with QDir::removeRecursively
  QString big_, small_, broken_;

  static QProgressBar* loadingBar(MainWindow& w) { return w.findChild<QProgressBar*>("loadingBar"); }

  void showWindow(MainWindow& w) {
    w.resize(900, 600);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
  }

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    QVERIFY(dir_.isValid());
    // A CT-like 256x256x200 int16 volume with noise, so gzip has real work to undo.
    Geometry g;
    g.size = {256, 256, 200};
    g.spacing = {0.8, 0.8, 1.0};
    Volume big(g, -1000.0f);
    big.setPixelType("int16");
    std::mt19937 rng(7);
    std::normal_distribution<float> noise(0.0f, 30.0f);
    for (std::int64_t z = 0; z < g.size[2]; ++z)
      for (std::int64_t y = 0; y < g.size[1]; ++y)
        for (std::int64_t x = 0; x < g.size[0]; ++x) {
          const double dx = x - 128.0, dy = y - 128.0, dz = (z - 100.0) * 1.2;
          const double r2 = dx * dx + dy * dy + dz * dz;
          const float base = r2 < 100.0 * 100.0 ? (r2 > 90.0 * 90.0 ? 1200.0f : 40.0f) : -1000.0f;
          big.at(x, y, z) = base + noise(rng);
        }
    big_ = dir_.path() + "/big.nii.gz";
    io::writeVolume(big, big_.toStdString(), {"int16", true});

    data::PhantomOptions o;
    o.size = {32, 24, 16};
    small_ = dir_.path() + "/small.nii.gz";
    io::writeVolume(data::makePhantom(o).image, small_.toStdString());

    broken_ = dir_.path() + "/broken.nii.gz";
    QFile f(broken_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(4096, '\x5a'));
  }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void loadsOffTheUiThread() {
    MainWindow w;
    showWindow(w);
    QSignalSpy done(&w, &MainWindow::volumeLoadFinished);
    StallMeter meter;
    QElapsedTimer clock;
    qint64 readMs = -1;
    // The reading ends when the loader reports idle, just before the window applies the volume.
    connect(w.volumeLoader(), &AsyncVolumeLoader::busyChanged, this, [&](bool busy) {
      if (!busy && readMs < 0) {
        readMs = clock.elapsed();
        meter.stop();
      }
    });
    meter.start();
    QTest::qWait(50);  // a few beats before the open
    clock.start();
    Q_EMIT w.dataPanel()->recentFileActivated(big_);  // the recent-files list's path
    const qint64 callMs = clock.elapsed();

    // Returned at once: nothing applied yet, the indicator is up.
    QVERIFY(w.isLoading());
    QVERIFY(!w.session()->image());
    QCOMPARE(w.statusText(), QString("Loading big.nii.gz…"));
    QVERIFY(loadingBar(w) && loadingBar(w)->isVisible());

    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 60000);
    const qint64 totalMs = clock.elapsed();
    QCOMPARE(done.front().at(0).toString(), big_);
    QVERIFY(done.front().at(1).toBool());
    QVERIFY(w.session()->image());
    QCOMPARE(w.session()->image()->size(), (std::array<std::int64_t, 3>{256, 256, 200}));
    QCOMPARE(w.session()->imageSource(), big_);
    QCOMPARE(w.statusText(), QString("Opened big.nii.gz"));
    QVERIFY(!loadingBar(w)->isVisible());
    QVERIFY(!w.isLoading());

    qInfo("open call %lld ms; load %lld ms (read on the worker, until delivery); longest UI stall while reading %.1f ms "
          "(p99 %.1f ms, %d beats); hand-over on the UI thread %lld ms",
          callMs, readMs, meter.longestStallMs(), meter.percentileStallMs(99), meter.beats(), totalMs - readMs);
    QVERIFY2(readMs > 0, "the read was not reported");
    QVERIFY2(callMs < readMs / 2, qPrintable(QString("the open call took %1 ms of a %2 ms load").arg(callMs).arg(readMs)));
    QVERIFY2(meter.longestStallMs() < readMs / 2.0,
             qPrintable(QString("UI stalled %1 ms during a %2 ms load").arg(meter.longestStallMs()).arg(readMs)));
  }

  void brokenFileKeepsTheOpenVolume() {
    MainWindow w;
    showWindow(w);
    QVERIFY(w.openVolume(small_));
    const auto before = w.session()->image();
    QSignalSpy done(&w, &MainWindow::volumeLoadFinished);
    QSignalSpy changed(w.session(), &Session::imageChanged);

    QVERIFY(w.openVolume(broken_, {}, MainWindow::Loading::Background));
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 30000);
    QVERIFY(!done.front().at(1).toBool());
    const QString message = w.statusText();
    qInfo("%s", qPrintable(message));
    QVERIFY2(message.startsWith("Could not open " + broken_ + ": "), qPrintable(message));
    QVERIFY(!message.contains('\n'));
    QVERIFY(!loadingBar(w)->isVisible());
    QCOMPARE(changed.count(), 0);
    QCOMPARE(w.session()->image(), before);
    QCOMPARE(w.session()->imageSource(), small_);

    // The same line as the blocking path gives, and a missing file too.
    QVERIFY(!w.openVolume(broken_));
    QCOMPARE(w.statusText(), message);
    const QString missing = dir_.path() + "/missing.nii.gz";
    w.openVolume(missing, {}, MainWindow::Loading::Background);
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 3, 30000);
    QCOMPARE(w.statusText(), QString("Could not open %1: no such file or folder").arg(missing));
    QCOMPARE(w.session()->image(), before);
  }

  void secondOpenSupersedesTheFirst() {
    MainWindow w;
    showWindow(w);
    QSignalSpy done(&w, &MainWindow::volumeLoadFinished);
    QSignalSpy changed(w.session(), &Session::imageChanged);
    Q_EMIT w.dataPanel()->recentFileActivated(big_);
    QCOMPARE(w.statusText(), QString("Loading big.nii.gz…"));
    Q_EMIT w.dataPanel()->recentFileActivated(small_);
    QCOMPARE(w.statusText(), QString("Loading small.nii.gz…"));
    QCOMPARE(w.volumeLoader()->pendingPath(), small_);
    // SPLITSEG_LOADING_PNG=/tmp/x.png saves the status bar as it looks while loading.
    if (qEnvironmentVariableIsSet("SPLITSEG_LOADING_PNG")) w.statusBar()->grab().save(qEnvironmentVariable("SPLITSEG_LOADING_PNG"));

    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 60000);
    QCOMPARE(done.front().at(0).toString(), small_);
    QCOMPARE(w.session()->imageSource(), small_);
    // The big read runs out on its worker; its result is dropped, never applied.
    QTRY_COMPARE_WITH_TIMEOUT(w.volumeLoader()->runningReads(), 0, 60000);
    QTest::qWait(100);
    QCOMPARE(done.count(), 1);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(w.session()->imageSource(), small_);
    QCOMPARE(w.session()->image()->size(), (std::array<std::int64_t, 3>{32, 24, 16}));
    QCOMPARE(w.statusText(), QString("Opened small.nii.gz"));

    // A blocking open (sessions) also drops a background load in flight.
    w.openVolume(big_, {}, MainWindow::Loading::Background);
    QVERIFY(w.openVolume(small_));
    QVERIFY(!w.isLoading());
    QVERIFY(!loadingBar(w)->isVisible());
    QTRY_COMPARE_WITH_TIMEOUT(w.volumeLoader()->runningReads(), 0, 60000);
    QTest::qWait(100);
    QCOMPARE(w.session()->imageSource(), small_);
    QCOMPARE(changed.count(), 2);

    // A label cannot start while an image is loading (it would be checked against the old one).
    w.openVolume(big_, {}, MainWindow::Loading::Background);
    QVERIFY(!w.loadLabel(small_, MainWindow::Loading::Background));
    QVERIFY(w.statusText().startsWith("Still loading big.nii.gz"));
    QTRY_VERIFY_WITH_TIMEOUT(!w.isLoading(), 60000);
    QCOMPARE(w.session()->imageSource(), big_);
  }

  void closingWhileLoadingWaitsForTheWorker() {
    auto* w = new MainWindow;
    w->resize(600, 400);
    w->openVolume(big_, {}, MainWindow::Loading::Background);
    QVERIFY(w->isLoading());
    delete w;  // waits for the read, drops its result
  }
};

SPLITSEG_UI_TEST_MAIN(VolumeLoadingTest)
#include "VolumeLoadingTest.moc"
