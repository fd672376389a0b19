// The GPipe schedule over ranks: every rank's order must be consistent with one global order in
// which each cell follows what it reads (forward) and what it needs gradients from (backward),
// or the ranks deadlock; messages must be told apart by their tags.
#include "core/base/Error.h"
#include "core/ranks/PipelineSchedule.h"
#include "core/placement/Placement.h"

#include <QtTest>

#include <map>
#include <set>

using namespace splitseg;
using splitseg::ranks::Cell;
using splitseg::ranks::PipelineSchedule;

namespace {
// The seed U-Net's stages at depth 3 (enc0, enc1, bottleneck, dec1, dec0, head).
std::vector<model::StageSpec> unet() {
  return {{"enc0", {"input"}, 1, 4, 0},          {"enc1", {"enc0"}, 4, 8, 1},
          {"bottleneck", {"enc1"}, 8, 16, 2},     {"dec1", {"bottleneck", "enc1"}, 16, 8, 1},
          {"dec0", {"dec1", "enc0"}, 8, 4, 0},    {"head", {"dec0"}, 4, 1, 0}};
}

// Simulates the ranks: each runs its cells in its order; a cell runs only when every cell it
// depends on has run (on any rank). Returns false when no rank can move (a deadlock).
bool runs(const PipelineSchedule& s, int ranks, bool backward) {
  std::vector<std::vector<Cell>> orders;
  for (int r = 0; r < ranks; ++r) orders.push_back(backward ? s.backwardOrder(r) : s.forwardOrder(r));
  std::set<std::pair<int, int>> done;
  std::vector<std::size_t> next(ranks, 0);
  auto ready = [&](const Cell& c) {
    for (int other = 0; other < s.stageCount(); ++other) {
      bool depends = false;
      if (!backward) {
        for (const auto& in : s.spec(c.stage).inputs) depends |= s.producer(in) == other;
      } else {
        for (const auto& in : s.spec(other).inputs) depends |= s.producer(in) == c.stage;
      }
      if (depends && !done.count({other, c.micro})) return false;
    }
    return true;
  };
  std::size_t total = 0;
  for (const auto& o : orders) total += o.size();
  while (done.size() < total) {
    bool moved = false;
    for (int r = 0; r < ranks; ++r)
      while (next[r] < orders[r].size() && ready(orders[r][next[r]])) {
        done.insert({orders[r][next[r]].stage, orders[r][next[r]].micro});
        ++next[r];
        moved = true;
      }
    if (!moved) return false;
  }
  return true;
}
} // namespace

class PipelineScheduleTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void ordersNeverDeadlock_data() {
    QTest::addColumn<QList<int>>("owners");
    QTest::addColumn<int>("micro");
    QTest::newRow("one rank") << QList<int>{0, 0, 0, 0, 0, 0} << 4;
    QTest::newRow("encoders | decoders, M=1") << QList<int>{0, 0, 1, 1, 1, 1} << 1;
    QTest::newRow("encoders | decoders, M=4") << QList<int>{0, 0, 1, 1, 1, 1} << 4;
    QTest::newRow("3 ranks, twins apart, M=2") << QList<int>{0, 1, 2, 1, 0, 0} << 2;
    QTest::newRow("3 ranks, alternating, M=4") << QList<int>{0, 1, 2, 0, 1, 2} << 4;
    QTest::newRow("3 ranks, head on rank 2, M=3") << QList<int>{1, 0, 1, 0, 2, 2} << 3;
  }
  void ordersNeverDeadlock() {
    QFETCH(QList<int>, owners);
    QFETCH(int, micro);
    const std::vector<int> o(owners.begin(), owners.end());
    PipelineSchedule s(unet(), o, micro);
    const int ranks = *std::max_element(o.begin(), o.end()) + 1;
    QVERIFY(runs(s, ranks, false));
    QVERIFY(runs(s, ranks, true));
    // Every cell exactly once, on its owner.
    std::size_t cells = 0;
    for (int r = 0; r < ranks; ++r) {
      for (const auto& c : s.forwardOrder(r)) QCOMPARE(s.owner(c.stage), r);
      cells += s.forwardOrder(r).size();
      QCOMPARE(s.backwardOrder(r).size(), s.forwardOrder(r).size());
    }
    QCOMPARE(cells, std::size_t(6 * micro));
  }

  // The simulation catches a bad order: stage-major forward on a rank whose decoder waits for the
  // other rank is fine, but running a consumer before its producer on the same rank is not.
  void simulationDetectsDeadlock() {
    // A schedule whose head reads a stage that no rank runs before it: refused when built.
    auto specs = unet();
    specs[1].inputs = {"dec0"};
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, PipelineSchedule(specs, {0, 0, 1, 1, 1, 1}, 1));
  }

  void wavefrontOverlapsMicroBatches() {
    // Rank 0 holds the encoders: it runs micro-batch 1's encoders before its own decoder of
    // micro-batch 0 (which waits for rank 1), so both ranks have work.
    PipelineSchedule s(unet(), {0, 1, 1, 1, 0, 0}, 2);
    const auto order = s.forwardOrder(0);
    auto pos = [&](int stage, int m) {
      return std::find(order.begin(), order.end(), Cell{stage, m}) - order.begin();
    };
    QVERIFY(pos(0, 1) < pos(4, 0));
    QVERIFY(pos(4, 0) < pos(5, 0));
  }

  void readersAndTags() {
    PipelineSchedule s(unet(), {0, 0, 1, 1, 1, 1}, 2);
    QCOMPARE(s.remoteReaders(0), std::vector<int>{1});  // enc0 -> dec0 on rank 1
    QCOMPARE(s.remoteReaders(1), std::vector<int>{1});  // enc1 -> bottleneck and dec1, sent once
    QCOMPARE(s.readsOn(1, 1), 2);
    QCOMPARE(s.remoteReaders(3), std::vector<int>{});
    QCOMPARE(s.inputReaders(), std::vector<int>{});
    std::set<int> tags;
    for (int k = 0; k < 7; ++k)
      for (int st = 0; st < 4095; st += 97)
        for (int m = 0; m < 4095; m += 101)
          QVERIFY(tags.insert(PipelineSchedule::tag(static_cast<ranks::Message>(k), st, m)).second);
  }

  void microSizes_data() {
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("micro");
    QTest::addColumn<QList<int>>("sizes");
    QTest::newRow("4/1") << 4 << 1 << QList<int>{4};
    QTest::newRow("4/4") << 4 << 4 << QList<int>{1, 1, 1, 1};
    QTest::newRow("5/2") << 5 << 2 << QList<int>{3, 2};
    QTest::newRow("7/3") << 7 << 3 << QList<int>{3, 2, 2};
  }
  void microSizes() {
    QFETCH(int, batch);
    QFETCH(int, micro);
    QFETCH(QList<int>, sizes);
    const auto got = placement::PipelineOrder::microSizes(batch, micro);
    QCOMPARE(QList<int>(got.begin(), got.end()), sizes);
  }

  void rankPlacementSyntax_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("canonical");
    QTest::addColumn<int>("rank");
    QTest::newRow("bare") << "cuda" << "cuda:0" << -1;
    QTest::newRow("rank cpu") << "r1:cpu" << "r1:cpu" << 1;
    QTest::newRow("rank cuda") << "r02:cuda" << "r2:cuda:0" << 2;
    QTest::newRow("no device") << "r1" << "" << 0;
    QTest::newRow("bad device") << "r1:gpu" << "" << 0;
    QTest::newRow("bad rank") << "rx:cpu" << "" << 0;
  }
  void rankPlacementSyntax() {
    QFETCH(QString, text);
    QFETCH(QString, canonical);
    QFETCH(int, rank);
    if (canonical.isEmpty()) {
      QVERIFY_THROWS_EXCEPTION(InvalidArgument, placement::canonicalDevice(text.toStdString()));
      return;
    }
    QCOMPARE(QString::fromStdString(placement::canonicalDevice(text.toStdString())), canonical);
    QCOMPARE(placement::splitRank(text.toStdString()).rank, rank);
  }
};

QTEST_APPLESS_MAIN(PipelineScheduleTest)
#include "PipelineScheduleTest.moc"
