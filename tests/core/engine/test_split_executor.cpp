// Split equivalence: a placement changes where stages run, never what they compute.
// The reference wires the U-Net by hand (decoder l takes encoder l), independent of the
// stage specs the executor follows, so a wrong skip connection fails here.
#include "core/engine/SplitExecutor.h"
#include "core/engine/MemoryMeter.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

namespace {
model::UNet3dOptions tinyOptions() {
  return model::UNet3dOptions().base_channels(4).depth(4).dropout({0.2, 0.2, 0.2});
}

torch::Tensor referenceForward(model::UNet3dImpl& net, const torch::Tensor& x) {
  const int d = net.options().depth();
  std::vector<torch::Tensor> enc;
  torch::Tensor y = x;
  for (int l = 0; l < d - 1; ++l) {
    y = net.runStage(static_cast<std::size_t>(l), {y});
    enc.push_back(y);
  }
  y = net.runStage(static_cast<std::size_t>(d - 1), {y});
  for (int l = d - 2; l >= 0; --l) y = net.runStage(static_cast<std::size_t>(d + (d - 2 - l)), {y, enc[l]});
  return net.runStage(static_cast<std::size_t>(2 * d - 1), {y});
}

std::vector<std::string> availableDevices() {
  std::vector<std::string> d{"cpu"};
  if (engine::cudaAvailable()) d.push_back("cuda:0");
  return d;
}
} // namespace

class TestSplitExecutor : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void equivalence_data() {
    QTest::addColumn<QString>("placement");
    // On CPU-only machines every device is cpu; with CUDA the same rows split across cuda:0 and cpu.
    const QString other = engine::cudaAvailable() ? "cuda:0" : "cpu";
    QTest::newRow("unsplit") << QString();
    QTest::newRow("encoders-elsewhere") << QString("enc0=%1,enc1=%1,enc2=%1").arg(other);
    QTest::newRow("skips-cross") << QString("enc0=%1,dec0=%1,head=%1").arg(other);
    QTest::newRow("alternating") << QString("enc1=%1,bottleneck=%1,dec1=%1").arg(other);
    QTest::newRow("decoders-elsewhere") << QString("dec2=%1,dec1=%1,dec0=%1,head=%1").arg(other);
  }
  void equivalence() {
    QFETCH(QString, placement);
    torch::manual_seed(7);
    auto holder = model::UNet3d(tinyOptions());
    auto& net = *holder;
    auto x = torch::randn({2, 1, 16, 16, 16});
    auto target = torch::rand({2, 1, 16, 16, 16});

    // Reference on the CPU, one device.
    torch::manual_seed(11);
    auto ref = referenceForward(net, x);
    (ref - target).pow(2).mean().backward();
    std::vector<torch::Tensor> refGrads;
    for (const auto& p : net.parameters()) refGrads.push_back(p.grad().clone());
    net.zero_grad();

    auto plan = placement::Placement::parse(placement.toStdString(), net.stageNames(), "cpu");
    engine::SplitExecutor exec(holder.ptr(), plan);
    torch::manual_seed(11);  // same dropout masks: same random calls in the same order
    auto out = exec.forward(x);
    QCOMPARE(out.device().str(), plan.deviceOf("head"));
    (out - target.to(out.device())).pow(2).mean().backward();
    QVERIFY(torch::allclose(out.cpu(), ref, 1e-5, 1e-5));
    std::size_t i = 0;
    for (const auto& p : net.parameters()) {
      QVERIFY2(p.grad().defined(), "parameter without gradient");
      QVERIFY2(torch::allclose(p.grad().cpu(), refGrads[i], 1e-5, 1e-5), "gradient differs from the unsplit model");
      ++i;
    }
    // Parameters live where the placement says.
    for (std::size_t s = 0; s < net.stageSpecs().size(); ++s)
      for (const auto& p : net.stageModule(s)->parameters())
        QCOMPARE(p.device().str(), plan.deviceOf(net.stageSpecs()[s].name));
  }

  void badPlacements_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown stage") << "enc9=cpu" << "unknown stage 'enc9'";
    QTest::newRow("bad device") << "enc0=tpu:0" << "unknown device 'tpu:0'";
    QTest::newRow("absent device") << "enc0=cuda:7" << "not available";
    QTest::newRow("not pairs") << "enc0" << "neither stage=device pairs";
    QTest::newRow("json missing stage") << "{\"stages\": {\"enc0\": \"cpu\"}}" << "lacks stages";
  }
  void badPlacements() {
    QFETCH(QString, placement);
    QFETCH(QString, expected);
    auto holder = model::UNet3d(tinyOptions());
    try {
      auto plan = placement::Placement::parse(placement.toStdString(), holder->stageNames(), "cpu");
      engine::SplitExecutor exec(holder.ptr(), plan);
      QFAIL("accepted a bad placement");
    } catch (const std::exception& e) {
      QVERIFY2(QString(e.what()).contains(expected), e.what());
    }
  }

  void placementJsonRoundTrip() {
    auto holder = model::UNet3d(tinyOptions());
    auto plan = placement::Placement::parse("enc0=cpu,dec0=cpu", holder->stageNames(), "cpu");
    auto back = placement::Placement::fromJson(plan.toJson(), holder->stageNames());
    QVERIFY(back == plan);
  }
};

QTEST_GUILESS_MAIN(TestSplitExecutor)
#include "test_split_executor.moc"
