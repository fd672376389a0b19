// Sliding-window prediction: same result as whole-volume when the volume fits one window,
// any volume size, and windows stitched exactly where they do not overlap.
#include "core/base/Error.h"
#include "core/engine/Inferer.h"
#include "core/engine/Tensors.h"
#include "core/model/UNet3d.h"
#include "core/volume/Preprocessing.h"

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

  // predictLabels hands the preprocessed volume over without a copy and converts the labels
  // straight into a volume; the result must equal the image taken through each step by hand
  // (copies, a float label tensor). Rows: a grid the network needs resampled and reoriented to,
  // and one it takes as it is.
  void predictLabelsEqualsStepByStep_data() {
    QTest::addColumn<int>("classes");
    QTest::addColumn<double>("spacing");
    QTest::addColumn<bool>("flipped");
    QTest::newRow("resampled, LAS, binary") << 1 << 0.8 << true;
    QTest::newRow("resampled, LAS, three classes") << 3 << 0.8 << true;
    QTest::newRow("as it is") << 1 << 0.0 << false;
  }
  void predictLabelsEqualsStepByStep() {
    QFETCH(int, classes);
    QFETCH(double, spacing);
    QFETCH(bool, flipped);
    auto n = net(classes);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    Geometry g;
    g.size = {19, 14, 11};
    g.spacing = {1.1, 0.9, 1.5};
    if (flipped) g.direction = {1, 0, 0, 0, -1, 0, 0, 0, 1};
    Volume source(g);
    torch::manual_seed(3);
    const auto noise = torch::randn({g.size[2], g.size[1], g.size[0]}) * 300;
    std::memcpy(source.data(), noise.data_ptr<float>(), sizeof(float) * static_cast<std::size_t>(noise.numel()));
    Preprocessing p;
    p.targetSpacing = {spacing, spacing, spacing};
    engine::InferOptions o;
    o.window = {16, 16, 16};

    const Volume input = p.applyToImage(source);
    const auto pred = inferer.predict(engine::toTensor(input).unsqueeze(0), o);
    const Volume expected = p.restore(engine::toVolume(pred.labels.to(torch::kFloat), input.geometry()), g,
                                      Interpolation::Nearest);
    const Volume labels = engine::predictLabels(inferer, source, p, o);
    QCOMPARE(labels.size(), g.size);
    QVERIFY(labels.geometry().sameGrid(g, 1e-9));
    QCOMPARE(labels.voxels(), expected.voxels());
    QVERIFY(*std::max_element(labels.voxels().begin(), labels.voxels().end()) >= 0);
  }

  // The conversions predictLabels relies on: a volume moved into a tensor keeps its voxels where
  // they are; a tensor of another type, or not contiguous, arrives in a volume converted.
  void tensorConversions() {
    Geometry g;
    g.size = {4, 3, 2};
    Volume v(g);
    for (std::size_t i = 0; i < v.voxels().size(); ++i) v.voxels()[i] = static_cast<float>(i);
    const float* where = v.data();
    const auto copied = engine::toTensor(v);
    QVERIFY(copied.data_ptr<float>() != where);
    const auto moved = engine::toTensor(std::move(v));
    QCOMPARE(moved.data_ptr<float>(), where);
    QCOMPARE(moved.sizes().vec(), (std::vector<std::int64_t>{2, 3, 4}));
    QVERIFY(torch::equal(moved, copied));
    // int64 labels, transposed (not contiguous), back into a volume of the transposed grid.
    const auto labels = torch::arange(24, torch::kLong).reshape({4, 3, 2}).transpose(0, 2);
    Geometry t;
    t.size = {4, 3, 2};
    const Volume back = engine::toVolume(labels, t);
    QVERIFY(torch::equal(engine::toTensor(back), labels.to(torch::kFloat)));
    Geometry wrong;
    wrong.size = {2, 3, 4};
    QVERIFY_THROWS_EXCEPTION(splitseg::InvalidArgument, engine::toVolume(labels, wrong));
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

  // Test-time mirroring: the probabilities of the mean of the logits over every combination of
  // flips, each flipped back (here from the executor directly), for the whole volume.
  void mirroringAveragesFlips_data() {
    QTest::addColumn<int>("classes");
    QTest::addColumn<QString>("axes");
    QTest::newRow("binary, x y z") << 1 << "xyz";
    QTest::newRow("three classes, z") << 3 << "z";
    QTest::newRow("binary, x y") << 1 << "xy";
  }
  void mirroringAveragesFlips() {
    QFETCH(int, classes);
    QFETCH(QString, axes);
    auto n = net(classes);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    torch::manual_seed(2);
    const auto image = torch::randn({1, 20, 16, 12});  // D, H, W multiples of the divisor (4)
    engine::InferOptions o;
    o.mirror = {axes.contains('x'), axes.contains('y'), axes.contains('z')};
    QCOMPARE(run::mirrorPasses(o.mirror), 1 << axes.size());
    const auto mirrored = inferer.predict(image, o);

    torch::NoGradGuard g;
    n->root().eval();
    std::vector<std::int64_t> dims;  // x = W, y = H, z = D of (N, C, D, H, W)
    for (int a = 0; a < 3; ++a)
      if (o.mirror[static_cast<std::size_t>(a)]) dims.push_back(4 - a);
    const auto x = image.unsqueeze(0);
    auto sum = torch::zeros({1, classes, 20, 16, 12});
    for (int m = 0; m < (1 << dims.size()); ++m) {
      std::vector<std::int64_t> flip;
      for (std::size_t i = 0; i < dims.size(); ++i)
        if ((m >> i) & 1) flip.push_back(dims[i]);
      sum += flip.empty() ? exec.forward(x) : exec.forward(x.flip(flip)).flip(flip);
    }
    const auto logits = sum / static_cast<double>(1 << dims.size());
    const auto expected = (classes == 1 ? torch::sigmoid(logits) : torch::softmax(logits, 1)).squeeze(0);
    QVERIFY(torch::allclose(mirrored.probabilities, expected, 1e-5, 1e-6));
    // Not the plain prediction (the check above would pass for it were the network symmetric).
    const auto plain = inferer.predict(image, {});
    QVERIFY((plain.probabilities - mirrored.probabilities).abs().max().item<float>() > 1e-3f);
  }

  // With every axis mirrored, sliding windows on a grid that is its own mirror image give the
  // mirror image of the prediction for the mirrored scan (an untrained network alone does not).
  void mirroredWindowsAreEquivariant_data() {
    QTest::addColumn<QString>("axes");
    QTest::addColumn<bool>("equivariant");
    QTest::newRow("x y z") << "xyz" << true;
    QTest::newRow("none") << "" << false;
  }
  void mirroredWindowsAreEquivariant() {
    QFETCH(QString, axes);
    QFETCH(bool, equivariant);
    auto n = net(3);
    engine::SplitExecutor exec(n, placement::Placement::uniform(n->stageNames(), "cpu"));
    engine::Inferer inferer(exec);
    torch::manual_seed(3);
    const auto image = torch::randn({1, 24, 24, 24});
    engine::InferOptions o;
    o.window = {16, 16, 16};  // starts 0 and 8 on each axis: the grid mirrors onto itself
    o.mirror = {axes.contains('x'), axes.contains('y'), axes.contains('z')};
    const auto p = inferer.predict(image, o).probabilities;
    const auto q = inferer.predict(image.flip({1, 3}), o).probabilities.flip({1, 3});  // z and x
    const float diff = (p - q).abs().max().item<float>();
    qInfo("mirror '%s': largest difference %.3g", qPrintable(axes), static_cast<double>(diff));
    if (equivariant) QVERIFY2(diff < 1e-5f, qPrintable(QString::number(diff)));
    else QVERIFY(diff > 1e-3f);
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
