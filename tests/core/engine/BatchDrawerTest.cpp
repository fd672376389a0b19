// The batches of a run (engine::BatchDrawer, shared by the Trainer and the trainers over ranks):
// a batch drawn ahead is the batch the next draw would have given, the state a checkpoint records
// comes from before it, a restored state draws the same batches again, and a state that is not a
// generator's is refused with one line naming the file.
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/BatchDrawer.h"

#include <QtTest>
#include <torch/torch.h>

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
