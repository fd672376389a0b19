// The batches of a run (engine::BatchDrawer, shared by the Trainer and the trainers over ranks):
// a batch drawn ahead is the batch the next draw would have given, the state a checkpoint records
// comes from before it, a restored state draws the same batches again, a state that is not a
// generator's is refused with one line naming the file, and a batch drawn ahead is drawn on a
// thread of its own while the caller goes on, never two draws at once.
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/BatchDrawer.h"
#include "core/engine/Tensors.h"

#include <QDir>
#include <QtTest>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

using namespace splitseg;

namespace {
run::RunSpec smallRun() {
  run::RunSpec o;
  o.patch = {16, 16, 16};
  o.batch = 2;
  o.seed = 7;
  return o;
}

engine::BatchDrawer drawer() { return engine::BatchDrawer(std::make_shared<data::PhantomSource>(), smallRun(), 2); }

bool sameBatch(const torch::Tensor& a, const torch::Tensor& b) { return torch::equal(a, b); }

// Threads of this process (Linux: one entry per thread under /proc/self/task).
int threadCount() {
  return static_cast<int>(QDir("/proc/self/task").entryList(QDir::Dirs | QDir::NoDotAndDotDot).size());
}
} // namespace

class BatchDrawerTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void drawnAheadIsTheNextBatch_data() {
    QTest::addColumn<int>("before");  // batches drawn first
    QTest::newRow("first batch") << 0;
    QTest::newRow("third batch") << 2;
  }
  void drawnAheadIsTheNextBatch() {
    QFETCH(int, before);
    auto plain = drawer(), ahead = drawer();
    torch::Tensor x, y, xa, ya;
    for (int i = 0; i < before; ++i) {
      plain.next(x, y);
      ahead.next(xa, ya);
    }
    const std::string stateBefore = ahead.state();
    ahead.drawAhead(false);
    QVERIFY(ahead.hasDrawnAhead());
    QCOMPARE(ahead.state(), stateBefore);  // a checkpoint now would draw this batch again
    plain.next(x, y);
    ahead.next(xa, ya);
    QVERIFY(!ahead.hasDrawnAhead());
    QVERIFY(sameBatch(x, xa) && sameBatch(y, ya));
    QCOMPARE(xa.sizes().vec(), (std::vector<std::int64_t>{2, 1, 16, 16, 16}));
    // And the batch after it too.
    plain.next(x, y);
    ahead.next(xa, ya);
    QVERIFY(sameBatch(x, xa));
  }

  // The batch is the samples as the source gave them: images as they are, labels rounded to int64,
  // in the source's order (the same generator drawing them one by one).
  void batchIsTheSamplesAsGiven_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("one foreground class") << 1;
    QTest::newRow("three foreground classes") << 3;
  }
  void batchIsTheSamplesAsGiven() {
    QFETCH(int, classes);
    auto run = smallRun();
    run.batch = 3;
    engine::BatchDrawer d(std::make_shared<data::PhantomSource>(classes), run, classes + 1);
    torch::Tensor x, y;
    d.next(x, y);
    data::PhantomSource same(classes);
    std::mt19937_64 rng(run.seed);
    std::vector<torch::Tensor> images, labels;
    for (int b = 0; b < run.batch; ++b) {
      auto s = same.next(run.patch, rng);
      images.push_back(engine::toTensor(s.channels));
      labels.push_back(engine::toTensor(s.label).round().to(torch::kLong));
    }
    QCOMPARE(y.scalar_type(), torch::kLong);
    QVERIFY(sameBatch(x, torch::stack(images)));
    QVERIFY(sameBatch(y, torch::stack(labels)));
    QCOMPARE(y.max().item<std::int64_t>(), static_cast<std::int64_t>(classes));
  }

  void samplesThatDifferAreRefused() {
    struct Growing : data::SampleSource {
      data::PhantomSource phantoms;
      std::int64_t edge = 12;
      data::Sample next(const std::array<std::int64_t, 3>&, std::mt19937_64& rng) override {
        edge += 2;
        return phantoms.next({edge, edge, edge}, rng);
      }
      std::string describe() const override { return "growing phantoms"; }
    };
    engine::BatchDrawer d(std::make_shared<Growing>(), smallRun(), 2);
    torch::Tensor x, y;
    try {
      d.next(x, y);
      QFAIL("samples of two sizes made one batch");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("differ in size"), e.what());
    }
  }

  void restoredStateDrawsTheSameBatches() {
    auto a = drawer();
    torch::Tensor x, y;
    a.next(x, y);
    a.drawAhead(false);
    const std::string saved = a.state();
    torch::Tensor expected, expectedLabels;
    a.next(expected, expectedLabels);
    auto b = drawer();
    b.restore(saved, "run.pt");
    b.next(x, y);
    QVERIFY(sameBatch(x, expected) && sameBatch(y, expectedLabels));
  }

  void badStateIsRefused_data() {
    QTest::addColumn<QString>("state");
    QTest::newRow("words") << "not a generator";
    QTest::newRow("too few numbers") << "1 2 3";
  }
  void badStateIsRefused() {
    QFETCH(QString, state);
    auto d = drawer();
    const std::string before = d.state();
    try {
      d.restore(state.toStdString(), "run.pt");
      QFAIL("a bad sampler state was accepted");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains("run.pt") && QString(e.what()).contains("not a generator state"), e.what());
    }
    QCOMPARE(d.state(), before);  // the generator is as it was
    d.restore("", "run.pt");      // an empty state (older checkpoints) leaves it too
    QCOMPARE(d.state(), before);
  }

  // The draw runs while the caller works: a source that takes a while returns control at once from
  // drawAhead, draws on another thread than the caller's, and is never entered twice at once,
  // whatever the caller does meanwhile (settle, state, a second drawAhead).
  void drawsAheadOnItsOwnThread_data() {
    QTest::addColumn<QString>("meanwhile");
    QTest::newRow("next") << "next";
    QTest::newRow("settle, then next") << "settle";
    QTest::newRow("second drawAhead") << "again";
  }
  void drawsAheadOnItsOwnThread() {
    QFETCH(QString, meanwhile);
    struct SlowSource : data::SampleSource {
      data::PhantomSource phantoms;
      std::atomic<int> inside{0}, most{0};
      std::mutex mutex;
      std::set<std::thread::id> threads;
      data::Sample next(const std::array<std::int64_t, 3>& size, std::mt19937_64& rng) override {
        const int now = ++inside;
        most = std::max(most.load(), now);
        {
          std::lock_guard<std::mutex> lock(mutex);
          threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        auto s = phantoms.next(size, rng);
        --inside;
        return s;
      }
      std::string describe() const override { return "slow phantoms"; }
    };
    auto source = std::make_shared<SlowSource>();
    engine::BatchDrawer d(source, smallRun(), 2);
    auto plain = drawer();
    const auto t0 = std::chrono::steady_clock::now();
    d.drawAhead(false);
    const double returnedAfter = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QVERIFY2(returnedAfter < 0.15, qPrintable(QString("drawAhead took %1 s: it drew on the caller's thread").arg(returnedAfter)));
    QVERIFY(d.hasDrawnAhead());
    if (meanwhile == "settle") d.settle();
    if (meanwhile == "again") d.drawAhead(false);  // one batch ahead at most: not a second draw
    torch::Tensor x, y, xp, yp;
    d.next(x, y);
    plain.next(xp, yp);
    QVERIFY(sameBatch(x, xp) && sameBatch(y, yp));  // the same batch as drawn on the caller's thread
    QCOMPARE(source->most.load(), 1);
    QCOMPARE(static_cast<int>(source->threads.size()), 1);
    QVERIFY(!source->threads.count(std::this_thread::get_id()));
    d.next(x, y);  // nothing ahead: drawn here
    plain.next(xp, yp);
    QVERIFY(sameBatch(x, xp));
    QVERIFY(source->threads.count(std::this_thread::get_id()));
  }

  // The draw runs no intra-op thread team: on a GPU host the team's threads spin after every
  // parallel region (GNU OpenMP's default wait policy) on the cores that launch the step's
  // kernels. Seen as thread count: a worker that ran one parallel region owns a team of
  // get_num_threads() - 1 more threads. Patches of 48^3 are over ATen's grain (32768 elements),
  // so a tensor copy there would run in parallel.
  void drawRunsNoThreadTeam_data() {
    QTest::addColumn<bool>("pinned");
    QTest::newRow("pageable") << false;
    QTest::newRow("pinned") << true;
  }
  void drawRunsNoThreadTeam() {
    QFETCH(bool, pinned);
    if (torch::get_num_threads() < 2) QSKIP("one intra-op thread: no team to start");
    if (pinned && !torch::cuda::is_available()) QSKIP("pinned memory needs CUDA");
    struct Fixed : data::SampleSource {
      data::Sample sample;
      data::Sample next(const std::array<std::int64_t, 3>&, std::mt19937_64&) override { return sample; }
      std::string describe() const override { return "one phantom"; }
    };
    auto source = std::make_shared<Fixed>();
    std::mt19937_64 rng(3);
    source->sample = data::PhantomSource().next({48, 48, 48}, rng);
    run::RunSpec run = smallRun();
    run.patch = {48, 48, 48};
    engine::BatchDrawer d(source, run, 2);
    const int before = threadCount();
    d.drawAhead(pinned);
    torch::Tensor x, y;
    d.next(x, y);
    d.drawAhead(pinned);
    d.next(x, y);
    QCOMPARE(threadCount(), before + 1);  // the drawer's worker, nothing else
    QCOMPARE(x.size(2), std::int64_t{48});
  }

  void refusedLabelsWaitForTheirDraw() {
    struct TooManyClasses : data::SampleSource {
      data::PhantomSource phantoms;
      data::Sample next(const std::array<std::int64_t, 3>& size, std::mt19937_64& rng) override {
        auto s = phantoms.next(size, rng);
        s.label.at(1, 1, 1) = 5;
        return s;
      }
      std::string describe() const override { return "labels up to 5"; }
    };
    engine::BatchDrawer d(std::make_shared<TooManyClasses>(), smallRun(), 2);
    d.drawAhead(false);  // no throw here
    torch::Tensor x, y;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, d.next(x, y));
    QVERIFY(!d.hasDrawnAhead());
  }
};

QTEST_GUILESS_MAIN(BatchDrawerTest)
#include "BatchDrawerTest.moc"
