// The host cache's placement rules as plain offsets (core/base/BestFitHeap): best fit, split,
// merge, top growth (and its refusal), trimming, and blocks coming back whole.
#include "core/base/BestFitHeap.h"

#include <QtTest>

#include <vector>

using splitseg::BestFitHeap;

namespace {
constexpr std::size_t KiB = 1024, MiB = KiB * KiB;
}

class BestFitHeapTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // Free blocks of the given sizes, made by taking them one after another (each separated by a
  // used 1 MiB block, so that they cannot merge) and giving them back; then one request. The
  // row says which free block it lands in (-1: at the top) and whether the heap grew.
  void takesBestFit_data() {
    QTest::addColumn<std::vector<std::size_t>>("free");
    QTest::addColumn<std::size_t>("request");
    QTest::addColumn<int>("landsIn");
    QTest::newRow("exact") << std::vector<std::size_t>{4 * MiB, 8 * MiB} << 8 * MiB << 1;
    QTest::newRow("smallest that fits") << std::vector<std::size_t>{16 * MiB, 6 * MiB, 9 * MiB} << 5 * MiB << 1;
    QTest::newRow("none fits: top") << std::vector<std::size_t>{2 * MiB, 3 * MiB} << 4 * MiB << -1;
    QTest::newRow("near fit, rest kept with it") << std::vector<std::size_t>{8 * MiB + 100 * KiB} << 8 * MiB << 0;
  }
  void takesBestFit() {
    QFETCH(std::vector<std::size_t>, free);
    QFETCH(std::size_t, request);
    QFETCH(int, landsIn);
    BestFitHeap heap;
    std::vector<std::size_t> offsets;
    for (auto size : free) {
      offsets.push_back(heap.take(size)->offset);
      heap.take(MiB);  // a used separator
    }
    for (auto o : offsets) heap.give(o);
    const std::size_t end = heap.end();
    const auto t = heap.take(request);
    QVERIFY(t.has_value());
    if (landsIn < 0) {
      QCOMPARE(t->offset, end);
      QCOMPARE(heap.end(), end + request);
      QVERIFY(!t->hit);
    } else {
      QCOMPARE(t->offset, offsets[landsIn]);
      QCOMPARE(heap.end(), end);
      QVERIFY(t->hit);
      // A rest of 256 KiB or more stays free; a smaller one goes with the block.
      const std::size_t block = free[landsIn];
      QCOMPARE(t->size, block - request >= BestFitHeap::kMinSplitBytes ? request : block);
    }
  }

  // Whatever a block was handed out as comes back whole (the host cache once lost the unsplit rest).
  void givesBackWholeBlocks() {
    BestFitHeap heap;
    const auto a = heap.take(8 * MiB + 100 * KiB);
    heap.take(MiB);
    heap.give(a->offset);
    const auto b = heap.take(8 * MiB);
    QCOMPARE(b->offset, a->offset);
    QCOMPARE(heap.used(), static_cast<std::int64_t>(8 * MiB + 100 * KiB + MiB));
    QCOMPARE(heap.give(b->offset), 8 * MiB + 100 * KiB);
    const auto c = heap.take(8 * MiB + 100 * KiB);
    QCOMPARE(c->offset, a->offset);
    QCOMPARE(heap.peakEnd(), 9 * MiB + 100 * KiB);
  }

  void mergesNeighboursAndSplits() {
    BestFitHeap heap;
    const auto a = heap.take(4 * MiB), b = heap.take(4 * MiB), c = heap.take(4 * MiB);
    heap.give(a->offset);
    heap.give(c->offset);  // the top block: free, but not merged with a
    heap.give(b->offset);  // now a, b and c are one free block
    QCOMPARE(heap.kept(), static_cast<std::int64_t>(12 * MiB));
    const auto d = heap.take(10 * MiB);  // fits only in the merged block; 2 MiB stay free
    QCOMPARE(d->offset, a->offset);
    QCOMPARE(heap.kept(), static_cast<std::int64_t>(2 * MiB));
    QCOMPARE(heap.end(), 12 * MiB);
    // A larger request takes the free top block and grows it.
    heap.give(d->offset);
    const auto e = heap.take(20 * MiB);
    QCOMPARE(e->offset, std::size_t{0});
    QCOMPARE(heap.end(), 20 * MiB);
  }

  void refusedGrowthChangesNothing() {
    BestFitHeap heap;
    const auto a = heap.take(4 * MiB);
    heap.give(a->offset);
    QVERIFY(!heap.take(8 * MiB, [](std::size_t end) { return end <= 6 * MiB; }).has_value());
    QCOMPARE(heap.kept(), static_cast<std::int64_t>(4 * MiB));
    QCOMPARE(heap.end(), 4 * MiB);
    QVERIFY(heap.take(8 * MiB, [](std::size_t end) { return end <= 8 * MiB; }).has_value());
  }

  void trimReleasesLargestFirst() {
    BestFitHeap heap;
    const auto a = heap.take(2 * MiB);
    heap.take(MiB);
    const auto b = heap.take(6 * MiB);
    heap.take(MiB);
    heap.give(a->offset);
    heap.give(b->offset);
    std::vector<std::pair<std::size_t, std::size_t>> released;
    heap.trim(static_cast<std::int64_t>(4 * MiB), [&](std::size_t o, std::size_t s) { released.emplace_back(o, s); });
    QCOMPARE(released.size(), std::size_t{1});
    QCOMPARE(released[0].first, b->offset);
    QCOMPARE(heap.kept(), static_cast<std::int64_t>(2 * MiB));
    // Kept memory is preferred to released memory even when the released block fits better.
    const auto c = heap.take(2 * MiB);
    QCOMPARE(c->offset, a->offset);
    QVERIFY(c->hit);
    const auto d = heap.take(5 * MiB);
    QCOMPARE(d->offset, b->offset);
    QVERIFY(!d->hit);
  }
};

QTEST_GUILESS_MAIN(BestFitHeapTest)
#include "BestFitHeapTest.moc"
