// The CLI as users call it: JSON lines per step, clear one-line errors, non-zero exits.
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

  void errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("unknown stage") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc7=cpu"}
                                   << "unknown stage 'enc7'";
    QTest::newRow("absent device") << QStringList{"train", "--synthetic", "32", "--base", "4", "--placement", "enc0=cuda:9"}
                                   << "not available";
    QTest::newRow("bad size") << QStringList{"train", "--synthetic", "30", "--base", "4"} << "multiple of 16";
    QTest::newRow("no data") << QStringList{"train", "--base", "4"} << "give training data";
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
