// The CLI as users call it: JSON lines per step, clear one-line errors, non-zero exits.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

namespace {
struct Result {
  int code;
  QString out;
  QString err;
};
Result cli(const QStringList& args) {
  QProcess p;
  p.start(SPLITSEG_CLI, args);
  p.waitForFinished(300000);
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}
} // namespace

class TestCli : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void trainPrintsJsonLines() {
    auto r = cli({"train", "--synthetic", "32", "--base", "4", "--steps", "5", "--placement", "enc0=cpu",
                  "--progress", "jsonl"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 5);
    int step = 0;
    for (const auto& line : lines) {
      QJsonParseError error;
      const auto doc = QJsonDocument::fromJson(line.toUtf8(), &error);
      QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(line));
      const auto o = doc.object();
      QCOMPARE(o.value("step").toInt(), ++step);
      QVERIFY(o.value("loss").isDouble());
      QVERIFY(o.value("memory").toArray().size() >= 1);
    }
  }

  void devicesListsCpu() {
    auto r = cli({"devices", "--json"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("\"cpu\""));
  }

  // --precision P (every stage) or P:stage,stage (those in P, the rest in the other), planned
  // per stage; train runs the same text.
  void stagePrecision_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("bf16Stages");
    QTest::newRow("fp32") << "fp32" << "";
    QTest::newRow("bf16") << "bf16" << "enc0,enc1,bottleneck,dec1,dec0,head";
    QTest::newRow("bf16:enc0,dec0") << "bf16:enc0,dec0" << "enc0,dec0";
    QTest::newRow("fp32:head") << "fp32:head" << "enc0,enc1,bottleneck,dec1,dec0";
  }
  void stagePrecision() {
    QFETCH(QString, precision);
    QFETCH(QString, bf16Stages);
    auto r = cli({"plan", "--size", "32", "--base", "4", "--depth", "3", "--precision", precision, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto plan = QJsonDocument::fromJson(r.out.toUtf8()).object().value("plan").toObject();
    QStringList got;
    for (const auto& s : plan.value("stages").toArray())
      if (s.toObject().value("precision").toString() == "bf16") got << s.toObject().value("name").toString();
    QCOMPARE(got.join(','), bf16Stages);
    QCOMPARE(plan.value("stage_precision").toString(), precision);
    if (precision != "bf16:enc0,dec0") return;  // one training run is enough
    auto t = cli({"train", "--synthetic", "32", "--base", "4", "--depth", "3", "--steps", "2", "--precision", precision,
                  "--recompute", "dec0", "--progress", "jsonl"});
    QVERIFY2(t.code == 0, qPrintable(t.err));
    QCOMPARE(t.out.trimmed().split('\n').size(), 2);
  }

  void errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("unknown stage") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc7=cpu"}
                                   << "unknown stage 'enc7'";
    QTest::newRow("absent device") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc0=cuda:9"}
                                   << "not available";
    QTest::newRow("bad size") << QStringList{"train", "--synthetic", "30", "--base", "4"} << "multiple of 16";
    QTest::newRow("no data") << QStringList{"train", "--base", "4"} << "give training data";
    QTest::newRow("precision: unknown stage")
        << QStringList{"train", "--synthetic", "32", "--base", "4", "--precision", "bf16:enc0,enc9"} << "unknown stage 'enc9'";
    QTest::newRow("precision: unknown type") << QStringList{"plan", "--size", "32", "--base", "4", "--precision", "fp16"}
                                             << "unknown precision 'fp16'";
    QTest::newRow("missing checkpoint") << QStringList{"infer", "--synthetic", "16", "--checkpoint", "/nonexistent.pt"}
                                        << "checkpoint not found";
  }
  void errors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    auto r = cli(args);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
    QCOMPARE(r.err.trimmed().count('\n'), 0);  // one line
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
