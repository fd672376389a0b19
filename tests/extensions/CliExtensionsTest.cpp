// Plugins, plugin training, sessions and TorchScript export, as users call them.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {
struct Result {
  int code;
  QString out;
  QString err;
};
Result run(const QString& program, const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(program, args);
  p.waitForFinished(600000);
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}
Result cli(const QStringList& args) { return run(SPLITSEG_CLI, args); }
const QString kSmall = R"({"base_channels":4,"depth":3})";
} // namespace

class CliExtensionsTest : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString path(const QString& name) const { return tmp_.filePath(name); }

private Q_SLOTS:
  void pluginsListsArchitecturesAndFailures() {
    QFile garbage(path("plugdir/broken.so"));
    QDir().mkpath(path("plugdir"));
    QVERIFY(garbage.open(QIODevice::WriteOnly));
    garbage.write("not a library");
    garbage.close();
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPLITSEG_PLUGIN_PATH", path("plugdir"));
    auto r = run(SPLITSEG_CLI, {"plugins", "--json"}, env);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QStringList names;
    for (const auto& a : o["architectures"].toArray()) names << a.toObject()["name"].toString();
    QCOMPARE(names, QStringList({"resunet3d", "unet3d"}));
    const auto failed = o["failed"].toArray();
    QCOMPARE(failed.size(), 1);
    QVERIFY(failed[0].toObject()["path"].toString().endsWith("broken.so"));
    QVERIFY(failed[0].toObject()["reason"].toString().contains("cannot load"));
    auto text = run(SPLITSEG_CLI, {"plugins"}, env);
    QVERIFY(text.out.contains("Plugins that did not load:"));
  }

  // A relative SPLITSEG_PLUGIN_PATH entry would load code from the folder SplitSeg starts in.
  void relativePluginPathIsIgnored() {
    QDir().mkpath(path("cwd/relplugins"));
    QFile::copy(RESUNET_PLUGIN_FILE, path("cwd/relplugins/resunet_copy.so"));
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPLITSEG_PLUGIN_PATH", "relplugins");
    QProcess p;
    p.setProcessEnvironment(env);
    p.setWorkingDirectory(path("cwd"));
    p.start(SPLITSEG_CLI, {"plugins", "--json"});
    QVERIFY(p.waitForFinished(60000));
    const auto o = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    bool refused = false;
    for (const auto& f : o["failed"].toArray())
      refused |= f.toObject()["path"].toString() == "relplugins" && f.toObject()["reason"].toString().contains("relative");
    QVERIFY2(refused, qPrintable(QJsonDocument(o).toJson()));
  }

  void trainPluginArchitectureThenInferFromItsCheckpoint() {
    auto r = cli({"train", "--arch", "resunet3d", "--arch-options", kSmall, "--synthetic", "32", "--steps", "3",
                  "--placement", "stem=cpu,head=cpu", "--progress", "jsonl", "--save", path("res.ckpt")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(r.out.count("\"loss\""), 3);  // one JSON line per step (plus the checkpoint line)
    auto i = cli({"infer", "--checkpoint", path("res.ckpt"), "--synthetic", "32", "--progress", "none"});
    QVERIFY2(i.code == 0, qPrintable(i.err));
    QVERIFY(i.out.contains("dice"));
    auto bad = cli({"train", "--arch", "nosuchnet", "--synthetic", "32", "--steps", "1"});
    QCOMPARE(bad.code, 1);
    QVERIFY2(bad.err.contains("unknown architecture 'nosuchnet'") && bad.err.contains("resunet3d"), qPrintable(bad.err));
  }

  // The checkpoint holds only plain values: Python opens it with weights_only=True.
  void checkpointOpensInPythonWeightsOnly() {
    auto t = cli({"train", "--arch", "resunet3d", "--arch-options", kSmall, "--synthetic", "32", "--steps", "2",
                  "--lr", "0.002", "--progress", "none", "--save", path("plain.ckpt")});
    QVERIFY2(t.code == 0, qPrintable(t.err));
    const QString python = SPLITSEG_PYTHON;
    if (python.isEmpty() || run(python, {"-c", "import torch"}).code != 0) QSKIP("no Python with torch");
    auto py = run(python, {CHECK_CHECKPOINT_PY, path("plain.ckpt")});
    QVERIFY2(py.code == 0, qPrintable(py.out + py.err));
    const auto o = QJsonDocument::fromJson(py.out.toUtf8()).object();
    QCOMPARE(o["step"].toInt(), 2);
    QCOMPARE(o["version"].toInt(), 3);
    QCOMPARE(o["architecture"].toString(), QString("resunet3d"));
    QCOMPARE(o["lr"].toDouble(), 0.002);
    QVERIFY(o["adam"].toInt() > 0 && o["tensors"].toInt() >= o["adam"].toInt());
  }

  void exportOpensInPythonWithTheSameOutput_data() {
    QTest::addColumn<QStringList>("trainArgs");
    QTest::newRow("resunet3d") << QStringList{"--arch", "resunet3d", "--arch-options", kSmall};
    QTest::newRow("unet3d") << QStringList{"--base", "4", "--depth", "3", "--norm", "instance"};
  }
  void exportOpensInPythonWithTheSameOutput() {
    QFETCH(QStringList, trainArgs);
    const QString tag = QTest::currentDataTag();
    auto t = cli(QStringList{"train", "--synthetic", "32", "--steps", "2", "--progress", "none", "--save",
                             path(tag + ".ckpt")} + trainArgs);
    QVERIFY2(t.code == 0, qPrintable(t.err));
    auto e = cli({"export", "--checkpoint", path(tag + ".ckpt"), "--out", path(tag + "/model.pt"), "--sample",
                  path(tag + "/sample")});
    QVERIFY2(e.code == 0, qPrintable(e.err));
    QVERIFY(QFile::exists(path(tag + "/model.preprocessing.json")));
    const QString python = SPLITSEG_PYTHON;
    if (python.isEmpty() || run(python, {"-c", "import torch"}).code != 0) QSKIP("no Python with torch");
    auto py = run(python, {CHECK_EXPORT_PY, path(tag + "/model.pt"), path(tag + "/sample")});
    qInfo("%s", qPrintable(py.out.trimmed()));
    QVERIFY2(py.code == 0, qPrintable(py.out + py.err));
    QCOMPARE(QJsonDocument::fromJson(py.out.toUtf8()).object()["architecture"].toString(), tag);
  }

  void sessionDrivesTrainAndReportsMissingFiles() {
    auto s = cli({"session", "save", "--out", path("proj/work.splitseg"), "--arch", "resunet3d", "--arch-options",
                  kSmall, "--checkpoint", path("proj/from-session.ckpt"), "--image", path("proj/missing.nii.gz")});
    QVERIFY2(s.code == 0, qPrintable(s.err));
    auto show = cli({"session", "show", path("proj/work.splitseg")});
    QVERIFY2(show.code == 0, qPrintable(show.err));
    const auto o = QJsonDocument::fromJson(show.out.toUtf8()).object();
    const auto run = o["run"].toObject();
    QCOMPARE(run["network"].toObject()["architecture"].toString(), QString("resunet3d"));
    QCOMPARE(run["network"].toObject()["options"].toObject()["depth"].toInt(), 3);
    QCOMPARE(run["checkpoint"].toString(), path("proj/from-session.ckpt"));  // resolved: absolute
    QCOMPARE(o["warnings"].toArray().size(), 2);  // the image and the not-yet-written checkpoint
    auto t = cli({"train", "--session", path("proj/work.splitseg"), "--synthetic", "32", "--steps", "2",
                  "--progress", "jsonl"});
    QVERIFY2(t.code == 0, qPrintable(t.err));
    QVERIFY2(t.err.contains("missing.nii.gz"), qPrintable(t.err));  // reported, not fatal
    QVERIFY(QFile::exists(path("proj/from-session.ckpt")));      // the session's checkpoint
    auto i = cli({"infer", "--session", path("proj/work.splitseg"), "--synthetic", "32", "--progress", "none"});
    QVERIFY2(i.code == 0, qPrintable(i.err));
  }
};

QTEST_GUILESS_MAIN(CliExtensionsTest)
#include "CliExtensionsTest.moc"
