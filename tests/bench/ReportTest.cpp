// tests/bench/report.py, the generator of docs/benchmarks.md (issue 17): verdicts come from the
// bootstrap interval over rounds (met only when the whole interval is on the goal's side), the
// planner's held-out worst case decides its goal, and the hand-written analysis may cite figures
// only through placeholders. Synthetic results files with known rounds drive it.
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace {

struct Run {
  int code = -1;
  QString out;
};

// One of tests/bench's scripts (beside report.py) with the project's Python.
Run runPython(const QString& script, const QStringList& args, QProcess::ProcessChannelMode mode) {
  QProcess p;
  p.setProcessChannelMode(mode);
  const QString python = QString(SPLITSEG_PYTHON).isEmpty() ? QStringLiteral("python3") : QString(SPLITSEG_PYTHON);
  p.start(python, QStringList{QFileInfo(REPORT_PY).dir().filePath(script)} + args);
  if (!p.waitForFinished(120000)) return {};
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput())};
}

Run runReport(const QStringList& args) { return runPython("report.py", args, QProcess::MergedChannels); }

// One training record of `kind` in `round` whose timed steps all take `seconds`.
QJsonObject trainRecord(const QString& kind, int round, double seconds) {
  return QJsonObject{{"kind", kind}, {"round", round}, {"steps", QJsonArray{seconds, seconds, seconds}},
                     {"cpu_steps", QJsonArray{2 * seconds, 2 * seconds, 2 * seconds}}};
}

QJsonObject planRecord(const QString& id, const QString& set, double measuredMiB, double predictedMiB) {
  const double mib = 1 << 20;
  return QJsonObject{{"kind", "plan:" + id}, {"set", set}, {"label", id}, {"round", 0},
                     {"peak_bytes", QJsonObject{{"cpu", measuredMiB * mib}}},
                     {"predicted", QJsonObject{{"peak", predictedMiB * mib + 30 * mib}, {"parameter_bytes", 10 * mib},
                                               {"optimizer_bytes", 20 * mib}}},
                     {"resident", QJsonObject{{"before", 100 * mib}, {"peak", 100 * mib + measuredMiB * mib + 10 * mib}}}};
}

void writeLines(const QString& path, const QList<QJsonObject>& records) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  for (const auto& r : records) f.write(QJsonDocument(r).toJson(QJsonDocument::Compact) + "\n");
}

QJsonObject summaryRow(const QString& summaryPath, const QString& id) {
  QFile f(summaryPath);
  if (!f.open(QIODevice::ReadOnly)) return {};
  for (const auto& v : QJsonDocument::fromJson(f.readAll()).array())
    if (v.toObject().value("id").toString() == id) return v.toObject();
  return {};
}

} // namespace

class ReportTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // Per-round SplitSeg / eager ratios (as "a,b,c" of ratios, eager at 1 s) -> verdict of "<= 0.9x".
  void verdictFromInterval_data() {
    QTest::addColumn<QString>("ratios");
    QTest::addColumn<QString>("verdict");
    QTest::newRow("all rounds well under") << "0.80,0.82,0.79,0.81,0.80,0.83,0.78" << "met";
    QTest::newRow("all rounds over") << "0.95,0.97,0.96,0.99,0.94,0.98,0.95" << "missed";
    QTest::newRow("interval straddles") << "0.80,0.95,0.82,0.97,0.85,0.93,0.88" << "not shown: interval straddles the goal";
    QTest::newRow("too few rounds") << "0.80,0.81,0.79" << "not shown: 3 rounds (< 7)";
    QTest::newRow("one bad round among good ones") << "0.80,0.81,0.79,0.82,1.50,0.80,0.81" << "met";
  }
  void verdictFromInterval() {
    QFETCH(QString, ratios);
    QFETCH(QString, verdict);
    QTemporaryDir dir;
    QList<QJsonObject> records;
    int round = 1;
    for (const auto& r : ratios.split(',')) {
      records << trainRecord("train_splitseg", round, r.toDouble()) << trainRecord("train_pytorch", round, 1.0);
      ++round;
    }
    writeLines(dir.filePath("r.jsonl"), records);
    const auto run = runReport({"--results", dir.filePath("r.jsonl"), "--summary", dir.filePath("s.json"),
                                "--analysis", ""});
    QVERIFY2(run.code == 0, qPrintable(run.out));
    const auto row = summaryRow(dir.filePath("s.json"), "train_eager");
    QCOMPARE(row.value("verdict").toString(), verdict);
    QVERIFY(row.value("lo").toDouble() <= row.value("median").toDouble());
    QVERIFY(row.value("median").toDouble() <= row.value("hi").toDouble());
    QCOMPARE(row.value("rounds").toInt(), ratios.count(',') + 1);
  }

  // Held-out planner errors (in %, against the allocation hook) -> verdict of "within 5%, never under by > 2%".
  void plannerWorstCase_data() {
    QTest::addColumn<QString>("errors");
    QTest::addColumn<QString>("verdict");
    QTest::newRow("all within, slightly over") << "1,4,-1" << "met";
    QTest::newRow("one 3% under") << "1,-3,2" << "missed";
    QTest::newRow("one 6% over") << "1,6,2" << "missed";
  }
  void plannerWorstCase() {
    QFETCH(QString, errors);
    QFETCH(QString, verdict);
    QTemporaryDir dir;
    QList<QJsonObject> records{planRecord("fitted", "fit", 100, 130)};  // a fit row never decides
    int i = 0;
    for (const auto& e : errors.split(','))
      records << planRecord(QString("held%1").arg(i++), "held-out", 200, 200 * (1 + e.toDouble() / 100));
    writeLines(dir.filePath("r.jsonl"), records);
    const auto run = runReport({"--results", dir.filePath("r.jsonl"), "--summary", dir.filePath("s.json"),
                                "--analysis", ""});
    QVERIFY2(run.code == 0, qPrintable(run.out));
    QCOMPARE(summaryRow(dir.filePath("s.json"), "planner_hook").value("verdict").toString(), verdict);
  }

  // Rerunning some sections (run.sh BENCH_ONLY + BENCH_MERGE) on another machine: the report keeps
  // the machine of the whole run and names, per rerun, the machine and the kinds measured there;
  // a later rerun of other kinds keeps the earlier rerun's attribution.
  void mergedRerunNamesItsMachine() {
    QTemporaryDir dir;
    auto merge = [&](const QString& oldFile, const QString& newFile) {
      QList<QJsonObject> out;
      const auto run = runPython("merge_results.py", {oldFile, newFile}, QProcess::SeparateChannels);
      for (const auto& line : run.out.toUtf8().split('\n'))
        if (!line.trimmed().isEmpty()) out << QJsonDocument::fromJson(line).object();
      return out;
    };
    auto machine = [](const QString& cpu) { return QJsonObject{{"kind", "machine"}, {"cpu", cpu}, {"date", "d"}}; };
    writeLines(dir.filePath("old.jsonl"), {machine("A"), trainRecord("train_splitseg", 1, 1.0),
                                           planRecord("x", "fit", 100, 100)});
    writeLines(dir.filePath("plan.jsonl"), {machine("B"), planRecord("x", "fit", 100, 101)});
    auto merged = merge(dir.filePath("old.jsonl"), dir.filePath("plan.jsonl"));
    writeLines(dir.filePath("m1.jsonl"), merged);
    QStringList kinds;
    for (const auto& r : merged) kinds << r.value("kind").toString();
    QCOMPARE(kinds, (QStringList{"machine", "train_splitseg", "machine_rerun", "plan:x"}));
    QCOMPARE(merged[0].value("cpu").toString(), QString("A"));
    QCOMPARE(merged[2].value("cpu").toString(), QString("B"));
    QCOMPARE(merged[2].value("kinds").toArray(), (QJsonArray{"plan"}));
    writeLines(dir.filePath("ui.jsonl"), {machine("C"), QJsonObject{{"kind", "ui_stall"}, {"p99_ms", 5.0}}});
    const auto again = merge(dir.filePath("m1.jsonl"), dir.filePath("ui.jsonl"));
    int reruns = 0;
    for (const auto& r : again)
      if (r.value("kind") == "machine_rerun") ++reruns;
    QCOMPARE(reruns, 2);  // B for plan, C for ui_stall
    writeLines(dir.filePath("m2.jsonl"), again);
    const auto run = runReport({"--results", dir.filePath("m2.jsonl"), "--analysis", "", "--docs", dir.path()});
    QVERIFY2(run.code == 0, qPrintable(run.out));
    QFile md(dir.filePath("benchmarks.md"));
    QVERIFY(md.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(md.readAll());
    QVERIFY(text.contains("on A, "));
    QVERIFY2(text.contains("Rerun on d on B, ? cores: `plan`.") && text.contains("Rerun on d on C, ? cores: `ui_stall`."),
             qPrintable(text.left(1500)));
  }

  // The analysis may cite a figure only through a placeholder; one typed by hand stops the report.
  void analysisFigures_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<bool>("accepted");
    QTest::addColumn<QString>("expected");
    QTest::newRow("placeholder") << "Training: {{train_eager.verdict}} at {{train_eager.ratio}}x." << true << "Training: met at 0.80x.";
    QTest::newRow("configuration numbers are not figures") << "Base 16 at 64^3 on 2 cores, issue 13." << true << "Base 16 at 64^3";
    QTest::newRow("hand-written ratio") << "Training is 0.88x eager." << false << "hand-written figure '0.88x'";
    QTest::newRow("hand-written percentage") << "The cache saves 18% here." << false << "hand-written figure '18%'";
    QTest::newRow("hand-written time") << "A step takes 2.5 s." << false << "hand-written figure '2.5 s'";
    QTest::newRow("inside code is fine") << "Set `SPLITSEG_HOST_CACHE=8GiB` to cap it." << true << "SPLITSEG_HOST_CACHE=8GiB";
    QTest::newRow("row that did not run") << "GPipe: {{gpipe.ratio}}." << true << "GPipe: n/a.";
  }
  void analysisFigures() {
    QFETCH(QString, text);
    QFETCH(bool, accepted);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    QList<QJsonObject> records;
    for (int round = 1; round <= 7; ++round)
      records << trainRecord("train_splitseg", round, 0.8) << trainRecord("train_pytorch", round, 1.0);
    writeLines(dir.filePath("r.jsonl"), records);
    QFile a(dir.filePath("analysis.md"));
    QVERIFY(a.open(QIODevice::WriteOnly));
    a.write(text.toUtf8() + "\n");
    a.close();
    const auto run = runReport({"--results", dir.filePath("r.jsonl"), "--analysis", dir.filePath("analysis.md"),
                                "--docs", dir.filePath("docs")});
    QCOMPARE(run.code == 0, accepted);
    if (accepted) {
      QFile md(dir.filePath("docs/benchmarks.md"));
      QVERIFY(md.open(QIODevice::ReadOnly));
      const QString doc = QString::fromUtf8(md.readAll());
      QVERIFY2(doc.contains(expected), qPrintable(doc.right(400)));
      QVERIFY(!doc.contains("{{"));
    } else {
      QVERIFY2(run.out.contains(expected), qPrintable(run.out));
      QVERIFY(!QFile::exists(dir.filePath("docs/benchmarks.md")));  // nothing half-written
    }
  }

  // docs/benchmarks.md is what report.py makes of the committed results, byte for byte: a figure
  // edited by hand, or results rerun without regenerating the report, fail here.
  void committedReportIsGenerated() {
    const QString docs = DOCS_DIR;
    if (!QFile::exists(docs + "/bench/results.jsonl")) QSKIP("no committed results");
    QTemporaryDir dir;
    const auto run = runReport({"--results", docs + "/bench/results.jsonl", "--gpu", docs + "/bench/gpu.json",
                                "--links", docs + "/bench/links.jsonl", "--docs", dir.path()});
    QVERIFY2(run.code == 0, qPrintable(run.out));
    QFile made(dir.filePath("benchmarks.md")), committed(docs + "/benchmarks.md");
    QVERIFY(made.open(QIODevice::ReadOnly) && committed.open(QIODevice::ReadOnly));
    const auto a = made.readAll(), b = committed.readAll();
    if (a != b) {
      const auto lines = a.split('\n'), old = b.split('\n');
      for (int i = 0; i < std::min(lines.size(), old.size()); ++i)
        if (lines[i] != old[i])
          QFAIL(qPrintable(QString("docs/benchmarks.md line %1 differs from the generated report:\n  committed: %2\n  "
                                   "generated: %3\n(rerun tests/bench/report.py, never edit the report by hand)")
                               .arg(i + 1).arg(QString(old[i]).left(200), QString(lines[i]).left(200))));
      QFAIL("docs/benchmarks.md differs from the generated report in length");
    }
  }
};

QTEST_GUILESS_MAIN(ReportTest)
#include "ReportTest.moc"
