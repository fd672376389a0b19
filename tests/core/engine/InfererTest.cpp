// Sliding-window prediction: same result as whole-volume when the volume fits one window,
// any volume size, and windows stitched exactly where they do not overlap.
#include "core/engine/Inferer.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

namespace {
std::shared_ptr<model::StagedNetwork> net(int classes) {
  torch::manual_seed(5);
  return model::UNet3d(model::UNet3dOptions().base_channels(4).depth(3).out_channels(classes)).ptr();
}
} // namespace

class InfererTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void fitsOneWindow_data() {
    QTest::addColumn<int>("classes");
    QTest::newRow("binary") << 1;
    QTest::newRow("three") << 3;
  }
  void fitsOneWindow() {
    QFETCH(int, classes);
    auto n = net(classes);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    auto image = torch::randn({1, 13, 18, 22});  // not multiples of anything
    auto whole = inferer.predict(image, {});
    engine::InferOptions o;
    o.window = {24, 24, 24};
    auto windowed = inferer.predict(image, o);
    QCOMPARE(windowed.probabilities.sizes().vec(), (std::vector<std::int64_t>{classes, 13, 18, 22}));
    QVERIFY(torch::allclose(whole.probabilities, windowed.probabilities, 1e-5, 1e-5));
    QVERIFY(torch::equal(whole.labels, windowed.labels));
  }

  void channelsLastIsExactAndTemporary() {
    auto n = net(1);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    auto image = torch::randn({1, 24, 20, 28});
    engine::InferOptions o;
    o.window = {16, 16, 16};
    o.cpuChannelsLast = false;
    const auto plain = inferer.predict(image, o);
    o.cpuChannelsLast = true;
    const auto fast = inferer.predict(image, o);
    QVERIFY(torch::allclose(plain.probabilities, fast.probabilities, 1e-5, 1e-6));
    QVERIFY(!exec.cpuChannelsLast());
    // Afterwards the weights are ordinary, default-layout tensors again: training goes on.
    int converted = 0;
    for (const auto& p : n->root().parameters()) {
      QVERIFY(p.is_contiguous());
      QVERIFY(!p.is_inference());
      QVERIFY(p.requires_grad());
    }
    // The conversion really happened while predicting (else this test proves nothing).
    exec.setCpuChannelsLast(true);
    for (const auto& p : n->root().parameters())
      if (p.dim() == 5 && p.size(1) > 1 && !p.is_contiguous()) ++converted;
    exec.setCpuChannelsLast(false);
    QVERIFY(converted > 0);
    n->root().train();
    auto out = exec.forward(torch::randn({1, 1, 16, 16, 16}));
    out.mean().backward();
    for (const auto& p : n->root().parameters()) QVERIFY(p.grad().defined());
  }

  void stitchesWindows_data() {
    QTest::addColumn<QList<int>>("size");
    QTest::newRow("multiple") << QList<int>{32, 32, 32};
    QTest::newRow("odd sizes") << QList<int>{37, 29, 50};
  }
  void stitchesWindows() {
    QFETCH(QList<int>, size);
    auto n = net(1);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    auto image = torch::randn({1, size[0], size[1], size[2]});
    engine::InferOptions o;
    o.window = {16, 16, 16};
    o.overlap = 0.0;
    o.gaussian = false;
    auto p = inferer.predict(image, o);
    QCOMPARE(p.probabilities.sizes().vec(), (std::vector<std::int64_t>{1, size[0], size[1], size[2]}));
    QVERIFY(torch::isfinite(p.probabilities).all().item<bool>());
    // Where only the first window reaches (13 voxels on every axis here), the result is
    // exactly the network on that crop.
    torch::NoGradGuard g;
    n->root().eval();
    using torch::indexing::Slice;
    auto crop = image.index({Slice(), Slice(0, 16), Slice(0, 16), Slice(0, 16)}).unsqueeze(0);
    auto direct = torch::sigmoid(exec.forward(crop)).squeeze(0);
    const auto pure = Slice(0, 13);
    QVERIFY(torch::allclose(p.probabilities.index({Slice(), pure, pure, pure}),
                            direct.index({Slice(), pure, pure, pure}), 1e-5, 1e-5));
    // Gaussian-weighted overlap stays a convex combination of window outputs.
    o.overlap = 0.5;
    o.gaussian = true;
    auto q = inferer.predict(image, o);
    QVERIFY(q.probabilities.min().item<float>() >= 0.0f && q.probabilities.max().item<float>() <= 1.0f);
  }

  void rejectsBadInput() {
    auto n = net(1);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    auto nan = torch::zeros({1, 8, 8, 8});
    nan[0][1][2][3] = std::numeric_limits<float>::quiet_NaN();
    QVERIFY_THROWS_EXCEPTION(std::exception, inferer.predict(nan, {}));
    QVERIFY_THROWS_EXCEPTION(std::exception, inferer.predict(torch::zeros({2, 8, 8, 8}), {}));
    engine::InferOptions o;
    o.window = {10, 10, 10};  // not a multiple of 4
    QVERIFY_THROWS_EXCEPTION(std::exception, inferer.predict(torch::zeros({1, 8, 8, 8}), o));
  }
};

QTEST_GUILESS_MAIN(InfererTest)
#include "InfererTest.moc"
