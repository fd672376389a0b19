// metrics::summarize: a label's mean Dice and HD95 over a dataset's cases, as nnU-Net's evaluation
// counts them (a case with the label in neither map is left out; an infinite HD95 is counted
// apart, not averaged).
#include "core/metrics/SegmentationMetrics.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace splitseg;

namespace {
// "label:dice:hd95:predicted:truth" entries, ';' between labels, '|' between cases; "inf" for HD95.
std::vector<std::vector<metrics::LabelMetrics>> parse(const QString& text) {
  std::vector<std::vector<metrics::LabelMetrics>> cases;
  for (const auto& c : text.split('|')) {
    cases.emplace_back();
    for (const auto& e : c.split(';', Qt::SkipEmptyParts)) {
      const auto f = e.split(':');
      metrics::LabelMetrics m;
      m.label = f[0].toInt();
      m.dice = f[1].toDouble();
      m.hd95 = f[2] == "inf" ? std::numeric_limits<double>::infinity() : f[2].toDouble();
      m.predicted = f[3].toLongLong();
      m.truth = f[4].toLongLong();
      cases.back().push_back(m);
    }
  }
  return cases;
}
} // namespace

class MetricsSummaryTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void summarizes_data() {
    QTest::addColumn<QString>("cases");
    QTest::addColumn<int>("label");  // the label the row checks
    QTest::addColumn<int>("labels");  // how many labels the summary has
    QTest::addColumn<int>("counted");
    QTest::addColumn<double>("dice");
    QTest::addColumn<double>("hd95");  // -1: infinite
    QTest::addColumn<int>("infinite");
    QTest::newRow("one case") << "1:0.8:2.5:10:12" << 1 << 1 << 1 << 0.8 << 2.5 << 0;
    QTest::newRow("mean over cases") << "1:0.8:2:10:12|1:0.6:4:9:9" << 1 << 1 << 2 << 0.7 << 3.0 << 0;
    // Label 2 is in neither map of case 1 (compute() gives it Dice 1): not counted.
    QTest::newRow("absent in both is left out")
        << "1:0.5:1:4:4;2:1:0:0:0|1:0.9:1:5:5;2:0.4:3:6:2" << 2 << 2 << 1 << 0.4 << 3.0 << 0;
    QTest::newRow("label in no case is not listed") << "1:0.5:1:4:4;2:1:0:0:0" << 1 << 1 << 1 << 0.5 << 1.0 << 0;
    // Predicted nowhere in case 1 (Dice 0, HD95 infinite): in the Dice mean, counted apart for HD95.
    QTest::newRow("infinite HD95") << "1:0:inf:0:5|1:1:0.5:5:5" << 1 << 1 << 2 << 0.5 << 0.5 << 1;
    QTest::newRow("only infinite HD95") << "1:0:inf:3:0" << 1 << 1 << 1 << 0.0 << -1.0 << 1;
  }
  void summarizes() {
    QFETCH(QString, cases);
    QFETCH(int, label);
    QFETCH(int, labels);
    QFETCH(int, counted);
    QFETCH(double, dice);
    QFETCH(double, hd95);
    QFETCH(int, infinite);
    const auto s = metrics::summarize(parse(cases));
    QCOMPARE(static_cast<int>(s.size()), labels);
    for (std::size_t i = 1; i < s.size(); ++i) QVERIFY(s[i - 1].label < s[i].label);
    const auto it = std::find_if(s.begin(), s.end(), [&](const metrics::LabelSummary& x) { return x.label == label; });
    QVERIFY(it != s.end());
    QCOMPARE(it->cases, counted);
    QVERIFY2(std::abs(it->meanDice - dice) < 1e-12, qPrintable(QString::number(it->meanDice)));
    if (hd95 < 0) QVERIFY(std::isinf(it->meanHd95));
    else QVERIFY2(std::abs(it->meanHd95 - hd95) < 1e-12, qPrintable(QString::number(it->meanHd95)));
    QCOMPARE(it->infiniteHd95, infinite);
  }
  void emptyInputGivesNothing() { QVERIFY(metrics::summarize({}).empty()); }
};

QTEST_GUILESS_MAIN(MetricsSummaryTest)
#include "MetricsSummaryTest.moc"
