// The host caching allocator: freed large blocks come back, freed memory serves other sizes (split
// and merged in one heap), memory reporting (and so the CPU counter, budgets and planner
// measurements) sees exactly what LibTorch's allocator reports, the limit holds, and training
// gives bit-identical results with and without reuse.
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

using namespace splitseg;
using engine::HostCachingAllocator;

namespace {
constexpr std::int64_t MiB = std::int64_t{1} << 20;
torch::Tensor floats(std::int64_t bytes) { return torch::empty({bytes / 4}, torch::kFloat); }
// A heap block: the request and a 64-byte header, in whole pages.
std::int64_t block(std::int64_t bytes) { return (bytes + 64 + 4095) / 4096 * 4096; }

std::vector<float> trainLosses(int steps) {
  torch::manual_seed(3);
  model::UNet3d net(model::UNet3dOptions().base_channels(4).depth(3));
  net->train();
  engine::SplitExecutor ex(net.ptr(), placement::Placement::uniform(net->stageNames(), "cpu"));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-2));
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    auto x = torch::randn({1, 1, 32, 32, 32});
    auto y = (x > 0.3).to(torch::kLong).squeeze(1);
    adam.zero_grad();
    auto loss = engine::segmentationLoss(ex.forward(x), y).loss;
    loss.backward();
    adam.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}
} // namespace

class HostCacheTest : public QObject {
  Q_OBJECT
  HostCachingAllocator* cache_ = nullptr;

private Q_SLOTS:
  void initTestCase() {
    at::set_num_threads(2);
    cache_ = engine::installHostCachingAllocator(256 * MiB);
    QVERIFY(cache_ != nullptr);
    QCOMPARE(static_cast<void*>(c10::GetCPUAllocator()), static_cast<void*>(cache_));
    // Installing again only changes the limit.
    QCOMPARE(engine::installHostCachingAllocator(256 * MiB), cache_);
  }
  void init() {
    cache_->setLimit(256 * MiB);
    cache_->emptyCache();
  }

  void freedLargeBlockIsReused() {
    void* first = nullptr;
    {
      auto t = floats(4 * MiB);
      first = t.data_ptr();
      QVERIFY(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
      QCOMPARE(cache_->stats().inUse, block(4 * MiB));
    }
    // init() gave every free block back: this one is kept all the same, not released with its
    // released neighbours (else every step would fault its pages in again).
    QCOMPARE(cache_->stats().cached, block(4 * MiB));
    const auto hits = cache_->stats().hits;
    auto again = floats(4 * MiB);
    QCOMPARE(again.data_ptr(), first);
    QCOMPARE(cache_->stats().hits, hits + 1);
    QCOMPARE(cache_->stats().cached, std::int64_t{0});
  }

  void largerBlockIsSplitAndMergedBack() {
    void* big = nullptr;
    {
      auto t = floats(16 * MiB);
      big = t.data_ptr();
    }
    const auto hits = cache_->stats().hits;
    {
      auto small = floats(2 * MiB);  // the front of the kept 16 MiB block; the rest stays free
      QCOMPARE(small.data_ptr(), big);
      QCOMPARE(cache_->stats().hits, hits + 1);
      QCOMPARE(cache_->stats().cached, block(16 * MiB) - block(2 * MiB));
    }
    QCOMPARE(cache_->stats().cached, block(16 * MiB));  // one block again
    auto whole = floats(16 * MiB);
    QCOMPARE(whole.data_ptr(), big);
  }

  // What a cache of whole blocks cannot do: two freed 8 MiB tensors hold a 16 MiB one, so a
  // training step's memory is not the sum of each size's own peak.
  void freedMemoryServesOtherSizes() {
    HostCachingAllocator heap(256 * MiB, 256 * MiB);  // a fresh heap: the two blocks are neighbours
    void* a = heap.raw_allocate(8 * MiB);
    void* b = heap.raw_allocate(8 * MiB);
    QCOMPARE(static_cast<char*>(b), static_cast<char*>(a) + block(8 * MiB));
    heap.raw_deallocate(a);
    heap.raw_deallocate(b);
    const auto before = heap.stats();
    void* c = heap.raw_allocate(2 * block(8 * MiB) - 64);
    QCOMPARE(c, a);
    QCOMPARE(heap.stats().misses, before.misses);
    QCOMPARE(heap.stats().hits, before.hits + 1);
    QCOMPARE(heap.stats().heap, before.heap);
    heap.raw_deallocate(c);
  }

  // A block handed out whole for a slightly smaller request (the rest too small to split off)
  // comes back whole: a later request of the block's full size reuses it, and nothing of it is
  // lost or left counted as in use.
  void nearFitBlockComesBackWhole() {
    HostCachingAllocator heap(256 * MiB, 256 * MiB);
    const std::int64_t rest = 100 * 1024;  // below kMinCachedBytes
    void* a = heap.raw_allocate(8 * MiB + rest);
    heap.raw_deallocate(a);
    const auto extent = heap.stats().heap;
    void* b = heap.raw_allocate(8 * MiB);
    QCOMPARE(b, a);
    QCOMPARE(heap.stats().inUse, block(8 * MiB + rest));  // the whole block is in use
    heap.raw_deallocate(b);
    QCOMPARE(heap.stats().inUse, std::int64_t{0});
    QCOMPARE(heap.stats().cached, block(8 * MiB + rest));
    void* c = heap.raw_allocate(8 * MiB + rest);
    QCOMPARE(c, a);
    QCOMPARE(heap.stats().heap, extent);
    heap.raw_deallocate(c);
  }

  // A heap too small for a block: that block comes from malloc, works, and is not kept.
  void fullHeapFallsBackToMalloc() {
    HostCachingAllocator small(64 * MiB, 4 * MiB);
    void* inHeap = small.raw_allocate(3 * MiB);
    void* outside = small.raw_allocate(3 * MiB);
    QVERIFY(inHeap && outside);
    static_cast<char*>(outside)[3 * MiB - 1] = 1;
    QCOMPARE(small.stats().heap, block(3 * MiB));
    small.raw_deallocate(outside);
    QCOMPARE(small.stats().cached, std::int64_t{0});
    small.raw_deallocate(inHeap);
    QCOMPARE(small.stats().cached, block(3 * MiB));
    QCOMPARE(small.stats().inUse, std::int64_t{0});
  }

  void smallBlocksAreNotCached() {
    { auto t = floats(64 * 1024); }
    QCOMPARE(cache_->stats().cached, std::int64_t{0});
  }

  void limitIsKeptAndCacheEmpties() {
    cache_->setLimit(8 * MiB);
    {
      auto a = floats(4 * MiB), b = floats(4 * MiB), c = floats(4 * MiB);
    }
    QVERIFY(cache_->stats().cached <= 8 * MiB);
    QVERIFY(cache_->stats().cached > 0);
    cache_->emptyCache();
    QCOMPARE(cache_->stats().cached, std::int64_t{0});
    cache_->setLimit(0);  // keeps nothing
    { auto t = floats(4 * MiB); }
    QCOMPARE(cache_->stats().cached, std::int64_t{0});
  }

  void reportsLikeLibTorch_data() {
    QTest::addColumn<qint64>("bytes");
    QTest::addColumn<bool>("warmCache");
    QTest::newRow("small") << qint64(4096) << false;
    QTest::newRow("large, fresh memory") << qint64(12 * MiB + 4) << false;
    QTest::newRow("large, from the cache") << qint64(12 * MiB + 4) << true;
  }
  void reportsLikeLibTorch() {
    QFETCH(qint64, bytes);
    QFETCH(bool, warmCache);
    if (warmCache) { auto t = floats(bytes); }
    engine::CpuMemoryCounter counter;
    auto before = floats(8 * MiB);  // allocated outside the scope: its free must not be counted
    {
      engine::CpuMemoryScope scope(counter);
      {
        auto t = floats(bytes);
        QCOMPARE(counter.allocated(), bytes / 4 * 4);  // requested bytes, not block capacity
      }
      QCOMPARE(counter.allocated(), std::int64_t{0});
      before = torch::Tensor();
      QCOMPARE(counter.allocated(), std::int64_t{0});
    }
    QCOMPARE(counter.peak(), bytes / 4 * 4);
  }

  // With the cache installed the budget is enforced at allocation time: refused with
  // c10::OutOfMemoryError (as CUDA's allocator does), nothing allocated, the counter flagged.
  void budgetRefusedAtAllocation() {
    engine::CpuMemoryCounter counter;
    counter.setBudget(MiB);
    engine::CpuMemoryScope scope(counter);
    QVERIFY_THROWS_EXCEPTION(c10::OutOfMemoryError, floats(4 * MiB));
    QVERIFY(counter.exceeded());
    QCOMPARE(counter.allocated(), std::int64_t{0});
    auto small = floats(MiB / 2);  // within the budget: still served
    QCOMPARE(counter.allocated(), MiB / 2);
  }

  void rawInterfaceWorks() {
    void* p = cache_->raw_allocate(MiB);
    QVERIFY(p != nullptr);
    static_cast<char*>(p)[MiB - 1] = 1;
    cache_->raw_deallocate(p);
    QCOMPARE(cache_->stats().cached, block(MiB));
  }

  void trainingIsBitIdenticalWithReuse() {
    cache_->setLimit(0);
    const auto fresh = trainLosses(4);
    cache_->setLimit(512 * MiB);
    const auto hits = cache_->stats().hits;
    const auto reused = trainLosses(4);
    QVERIFY2(cache_->stats().hits > hits + 20, "a training step should reuse its blocks");
    QCOMPARE(reused.size(), fresh.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) QCOMPARE(reused[i], fresh[i]);
  }
};

QTEST_GUILESS_MAIN(HostCacheTest)
#include "HostCacheTest.moc"
