// File > Save/Open Session: a session saved from one window reopens in a fresh one with the
// same image, label, network, placement and run settings; a missing file is a warning and the
// rest still opens. File > Export model writes TorchScript that computes what the session's
// network computes, and a failed export leaves nothing behind.
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "core/io/VolumeWriter.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/StagedNetwork.h"
#include "core/volume/Preprocessing.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/session/Session.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <torch/script.h>

using namespace splitseg;
using namespace splitseg::ui;

class SessionFileTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString image_, label_;

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    data::PhantomOptions o;
    o.size = {32, 32, 16};
    o.spacing = {1.2, 1.2, 2.5};
    const auto p = data::makePhantom(o);
    image_ = dir_.path() + "/image.nii.gz";
    label_ = dir_.path() + "/label.nii.gz";
    io::writeVolume(p.image, image_.toStdString());
    io::writeVolume(p.label, label_.toStdString());
  }

  void exportModelWritesTorchScript() {
    MainWindow w;
    w.resize(900, 600);
    w.session()->createUNet(4, 3);
    const QString path = dir_.path() + "/model.pt";
    QVERIFY(w.exportModel(path));
    QVERIFY2(w.statusText().contains("model.pt"), qPrintable(w.statusText()));
    QVERIFY(QFile::exists(path));
    QFile json(dir_.path() + "/model.preprocessing.json");
    QVERIFY(json.open(QIODevice::ReadOnly));
    const auto meta = QJsonDocument::fromJson(json.readAll()).object();
    const auto pre = Preprocessing::fromJson(
        QJsonDocument(meta.value("preprocessing").toObject()).toJson().toStdString());
    // The run's preprocessing, the one training and review use.
    QCOMPARE(pre.toJson(), w.session()->run().preprocessing.toJson());
    QVERIFY(pre.intensity.mode == IntensityMode::Ct);
    QCOMPARE(meta.value("window").toArray().at(0).toInt(), int(w.session()->run().patch[0]));
    // The exported module computes what the session's network computes.
    torch::manual_seed(2);
    const auto x = torch::randn({1, 1, 16, 24, 16});
    auto net = w.session()->network();
    net->root().eval();
    torch::NoGradGuard noGrad;
    engine::SplitExecutor executor(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    const auto expected = executor.forward(x);
    auto module = torch::jit::load(path.toStdString());
    const auto got = module.forward({x}).toTensor();
    QVERIFY(torch::allclose(got, expected, 1e-5, 1e-6));
    // A path that cannot be written (its folder is a file): one error line, nothing left behind.
    const QString bad = image_ + "/model.pt";
    QVERIFY(!w.exportModel(bad));
    QVERIFY2(w.statusText().startsWith("Could not export"), qPrintable(w.statusText()));
    QVERIFY(!QFile::exists(bad));
  }

  void roundTrip() {
    const QString path = dir_.path() + "/work.splitseg";
    std::string placement;
    {
      MainWindow a;
      a.resize(900, 600);
      QVERIFY(a.openVolume(image_, label_));
      a.session()->createUNet(8, 4);
      auto p = a.session()->placement();
      QCOMPARE(p.stages().size(), std::size_t(8));
      auto run = a.session()->run();
      run.patch = {48, 48, 32};
      run.batch = 2;
      run.precision = placement::StagePrecisions::parse("bf16");
      run.recompute = {"enc0", "dec0"};
      a.session()->setRun(run);
      placement = a.session()->placement().toJson();
      QVERIFY(a.saveSessionFile(path));
    }
    QVERIFY(QFile::exists(path));
    MainWindow b;
    b.resize(900, 600);
    const QStringList warnings = b.openSessionFile(path);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QCOMPARE(b.session()->imageSource(), image_);
    QCOMPARE(b.session()->groundTruthSource(), label_);
    QVERIFY(b.session()->groundTruth());
    QCOMPARE(b.session()->network()->stageSpecs().size(), std::size_t(8));  // depth 4, not the default 5
    QCOMPARE(b.session()->placement().toJson(), placement);
    const auto& run = b.session()->run();
    QCOMPARE(run.patch, (std::array<std::int64_t, 3>{48, 48, 32}));
    QCOMPARE(run.batch, 2);
    QCOMPARE(run.precision.toString(), std::string("bf16"));
    QCOMPARE(run.recompute, (std::set<std::string>{"enc0", "dec0"}));
  }

  // File > Open session reads the volumes in the background: the network and run are the
  // session's as soon as it returns, the image and label arrive without the window waiting for
  // them; an image that cannot be read any more is reported in the status bar and the rest of the
  // session stays open.
  void opensInTheBackground() {
    const QString path = dir_.path() + "/background.splitseg";
    const QString copy = dir_.path() + "/background-image.nii.gz";
    QVERIFY(QFile::copy(image_, copy));
    {
      MainWindow a;
      QVERIFY(a.openVolume(copy, label_));
      a.session()->createUNet(4, 4);
      auto run = a.session()->run();
      run.patch = {32, 32, 16};
      a.session()->setRun(run);
      QVERIFY(a.saveSessionFile(path));
    }
    {
      MainWindow b;
      QSignalSpy done(&b, &MainWindow::volumeLoadFinished);
      const QStringList warnings = b.openSessionFile(path, MainWindow::Loading::Background);
      QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
      QVERIFY(b.isLoading());
      QVERIFY(!b.session()->image());  // still being read
      QCOMPARE(b.session()->network()->stageSpecs().size(), std::size_t(8));
      QCOMPARE(b.session()->run().patch, (std::array<std::int64_t, 3>{32, 32, 16}));
      QVERIFY(done.wait(60000));
      QCOMPARE(done.front().at(1).toBool(), true);
      QCOMPARE(b.session()->imageSource(), copy);
      QVERIFY(b.session()->groundTruth());
      QCOMPARE(b.session()->groundTruthSource(), label_);
      QVERIFY(!b.isLoading());
    }
    // The image replaced by something that is no volume: the session opens, the read fails later.
    {
      QFile f(copy);
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write("not a volume");
    }
    MainWindow c;
    QSignalSpy done(&c, &MainWindow::volumeLoadFinished);
    QVERIFY(c.openSessionFile(path, MainWindow::Loading::Background).isEmpty());
    QCOMPARE(c.session()->network()->stageSpecs().size(), std::size_t(8));
    QVERIFY(done.wait(60000));
    QCOMPARE(done.front().at(1).toBool(), false);
    QVERIFY(!c.session()->image());
    QVERIFY2(c.statusText().startsWith("Could not open") && c.statusText().contains("background-image.nii.gz"),
             qPrintable(c.statusText()));
    QCOMPARE(c.session()->run().patch, (std::array<std::int64_t, 3>{32, 32, 16}));
  }

  // Hosts come back with the placement on their ranks: a local rank and a remote worker.
  void hostsRoundTrip() {
    const QString path = dir_.path() + "/ranks.splitseg";
    std::string placement;
    {
      MainWindow a;
      a.session()->createUNet(4, 3);
      QCOMPARE(a.session()->addRank(RankHost{}), std::string("r1:cpu"));
      RankHost remote;
      remote.host = "gpu-node-2";
      remote.device = "cuda:1";
      remote.totalBytes = std::int64_t{80} << 30;
      QCOMPARE(a.session()->addRank(remote), std::string("r2:cuda:1"));
      a.session()->setRendezvousPort(29611);
      auto p = a.session()->placement();
      p.assign("dec0", "r1:cpu");
      p.assign("bottleneck", "r2:cuda:1");
      a.session()->setPlacement(p);
      placement = a.session()->placement().toJson();
      QVERIFY(a.saveSessionFile(path));
    }
    MainWindow b;
    const QStringList warnings = b.openSessionFile(path);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QCOMPARE(b.session()->placement().toJson(), placement);
    QCOMPARE(b.session()->hosts().size(), std::size_t(2));
    QCOMPARE(b.session()->hosts()[1].host, std::string("gpu-node-2"));
    QCOMPARE(b.session()->hosts()[1].totalBytes, std::int64_t{80} << 30);
    QCOMPARE(b.session()->rendezvousPort(), 29611);
    QVERIFY(b.session()->device("r2:cuda:1"));
    QCOMPARE(b.session()->device("r2:cuda:1")->totalBytes, std::int64_t{80} << 30);
  }

  // A shared session's hosts are checked field by field; a bad entry is one warning, the rest opens.
  void hostileHostsAreRefused_data() {
    QTest::addColumn<QString>("hosts");
    QTest::addColumn<QString>("expected");
    QTest::newRow("not a list") << R"({"rank":1})" << "expected a list";
    QTest::newRow("rank 0") << R"([{"rank":0,"device":"cpu"}])" << "not in 1..64";
    QTest::newRow("huge rank") << R"([{"rank":1e12,"device":"cpu"}])" << "rank: expected an integer";
    QTest::newRow("rank twice") << R"([{"rank":1,"device":"cpu"},{"rank":1,"device":"cpu"}])" << "twice";
    QTest::newRow("shell in host") << R"([{"rank":1,"host":"a;rm -rf ~","device":"cpu"}])" << "not a host name";
    QTest::newRow("bad device") << R"([{"rank":1,"device":"tpu:0"}])" << "device";
    QTest::newRow("device with rank") << R"([{"rank":1,"device":"r2:cpu"}])" << "names a rank";
    QTest::newRow("negative memory") << R"([{"rank":1,"host":"h","device":"cuda:0","total_bytes":-5}])" << "0..16 TiB";
    QTest::newRow("unknown key") << R"([{"rank":1,"device":"cpu","command":"x"}])" << "command: unknown key";
  }
  void hostileHostsAreRefused() {
    QFETCH(QString, hosts);
    QFETCH(QString, expected);
    const QString path = dir_.path() + "/hostile.splitseg";
    {
      MainWindow a;
      auto run = a.session()->run();
      run.batch = 3;
      a.session()->setRun(run);
      QVERIFY(a.saveSessionFile(path));
    }
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto j = nlohmann::json::parse(f.readAll().toStdString());
    f.close();
    j["view"]["hosts"] = nlohmann::json::parse(hosts.toStdString());
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(QByteArray::fromStdString(j.dump()));
    f.close();
    MainWindow b;
    const QStringList warnings = b.openSessionFile(path);
    QVERIFY2(warnings.join(" ").contains("hosts not restored") && warnings.join(" ").contains(expected),
             qPrintable(warnings.join("; ")));
    QVERIFY(b.session()->hosts().empty());
    QCOMPARE(b.session()->run().batch, 3);  // the rest of the session still opened
    test::warnings().clear();  // the status bar reported it on purpose
  }

  void missingFileIsAWarning() {
    QTemporaryDir other;
    const QString moved = other.path() + "/image.nii.gz";
    QVERIFY(QFile::copy(image_, moved));
    const QString path = other.path() + "/moved.splitseg";
    {
      MainWindow a;
      QVERIFY(a.openVolume(moved));
      auto run = a.session()->run();
      run.batch = 3;
      a.session()->setRun(run);
      QVERIFY(a.saveSessionFile(path));
    }
    QVERIFY(QFile::remove(moved));
    MainWindow b;
    const QStringList warnings = b.openSessionFile(path);
    QVERIFY(!warnings.isEmpty());
    QVERIFY2(warnings.join(" ").contains("image.nii.gz"), qPrintable(warnings.join("; ")));
    QCOMPARE(b.session()->run().batch, 3);  // the rest of the session still opened
    test::warnings().clear();  // the status bar reported the missing file on purpose
  }

  // Opening a session replaces the network a run is using: refused while one is busy, with the
  // run description left as it was.
  void refusedWhileBusy() {
    const QString path = dir_.path() + "/busy.splitseg";
    MainWindow w;
    w.session()->createUNet(4, 3);
    QVERIFY(w.saveSessionFile(path));
    auto run = w.session()->run();
    run.batch = 5;
    w.session()->setRun(run);
    w.session()->setBusy(true);
    const QStringList warnings = w.openSessionFile(path);
    QCOMPARE(warnings.size(), 1);
    QVERIFY2(warnings.front().contains("busy"), qPrintable(warnings.front()));
    QCOMPARE(w.session()->run().batch, 5);
    w.session()->setBusy(false);
    QVERIFY(w.openSessionFile(path).isEmpty());
    QCOMPARE(w.session()->run().batch, 2);  // the saved run
    test::warnings().clear();
  }

  // Issue 50: hostile session files. 200,000 nested arrays (400 KB) overflowed the stack; raw
  // bytes or a control sequence in a path reached the status bar as they were. Now each is one
  // escaped line in the status bar, and a file that is refused changes nothing.
  void hostileSessionIsOneStatusLine_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<bool>("background");
    QTest::addColumn<bool>("opens");
    QTest::addColumn<QString>("status");  // <path>: the session file
    QTest::addColumn<bool>("exact");      // the whole status line, or a part of it
    const QByteArray deep = R"({"splitseg_session":2,"volumes":[],"run":{"splitseg_run":1},"view":)" +
                            QByteArray(200000, '[') + QByteArray(200000, ']') + "}";
    const QString refused = "Could not open session: <path>: session nests JSON arrays and objects deeper than 64 levels; refused";
    QTest::newRow("200,000 deep") << deep << false << false << refused << true;
    QTest::newRow("200,000 deep, in the background") << deep << true << false << refused << true;
    QTest::newRow("raw 0xFF in a path (not JSON)")
        << QByteArray("{\"splitseg_session\":2,\"volumes\":[{\"path\":\"scan\xff\x1b[2J.nii.gz\",\"role\":\"image\"}]}")
        << false << false << "last read: '\"scan\\xff'" << false;
    QTest::newRow("ESC in a path")
        << QByteArray("{\"splitseg_session\":2,\"volumes\":[{\"path\":\"scan\\u001b[2J.nii.gz\",\"role\":\"image\"}],"
                      "\"run\":{\"splitseg_run\":1}}")
        << false << true << QString("1 problem(s): image volume not found: ") + dir_.path() + "/scan\\x1b[2J.nii.gz" << false;
  }
  void hostileSessionIsOneStatusLine() {
    QFETCH(QByteArray, content);
    QFETCH(bool, background);
    QFETCH(bool, opens);
    QFETCH(QString, status);
    QFETCH(bool, exact);
    const QString path = dir_.path() + "/hostile.splitseg";
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(content);
    f.close();
    MainWindow w;
    auto run = w.session()->run();
    run.batch = 4;
    w.session()->setRun(run);
    const QStringList warnings = w.openSessionFile(path, background ? MainWindow::Loading::Background : MainWindow::Loading::Blocking);
    status.replace("<path>", path);
    const QString shown = w.statusText();
    if (exact) QCOMPARE(shown, status);
    else QVERIFY2(shown.contains(status), qPrintable(shown));
    QCOMPARE(warnings.size(), 1);
    for (const QString& text : {shown, warnings.front()})
      for (const QChar c : {QChar(u'\n'), QChar(0x1b), QChar(0xff), QChar(QChar::ReplacementCharacter)})
        QVERIFY2(!text.contains(c), qPrintable(text.toUtf8().toPercentEncoding(" /:\\[]'\"(),")));
    if (!opens) QCOMPARE(w.session()->run().batch, 4);  // refused: nothing changed
    test::warnings().clear();  // the status bar reported it on purpose
  }

  void notASession() {
    const QString bogus = dir_.path() + "/bogus.splitseg";
    QFile f(bogus);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{ this is not json");
    f.close();
    MainWindow w;
    const QStringList warnings = w.openSessionFile(bogus);
    QCOMPARE(warnings.size(), 1);
    QVERIFY2(warnings.front().contains("bogus.splitseg"), qPrintable(warnings.front()));
    test::warnings().clear();
  }
};

QTEST_MAIN(SessionFileTest)
#include "SessionFileTest.moc"
