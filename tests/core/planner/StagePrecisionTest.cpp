// Per-stage precision in the engine: a mixed placement runs bf16 autocast only in the chosen
// stages (their activations are bf16, the others fp32), checkpointed or not, and its gradients
// stay close to an all-fp32 step. Here beside the planner tests, which plan the same settings.
#include "core/engine/Loss.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

#include <map>
#include <set>

using namespace splitseg;

namespace {

struct Step {
  std::map<std::string, torch::ScalarType> outputTypes;
  torch::ScalarType logitsType = torch::kFloat;
  std::vector<torch::Tensor> grads;
};

model::UNet3d makeNet() {
  torch::manual_seed(7);
  // No norm layers: the bound below was set on this network (with instance norm the conv biases in
  // front of each norm get gradients near zero, and relative errors there say nothing).
  model::UNet3d net(model::UNet3dOptions().base_channels(8).depth(3).dropout({0.0}).norm(model::Norm::None));
  net->train();
  return net;
}

Step run(const std::string& precision, const std::set<std::string>& checkpoint) {
  auto net = makeNet();
  engine::SplitExecutor ex(net.ptr(), placement::Placement::uniform(net->stageNames(), "cpu"),
                           placement::StagePrecisions::parse(precision, net->stageNames()), checkpoint);
  Step r;
  ex.setOutputObserver([&](const std::string& stage, const torch::Tensor& out) { r.outputTypes[stage] = out.scalar_type(); });
  torch::manual_seed(3);
  const auto input = torch::randn({1, 1, 32, 32, 32});
  const auto target = (input.squeeze(1) > 0.3).to(torch::kLong);
  const auto logits = ex.forward(input);
  r.logitsType = logits.scalar_type();
  engine::segmentationLoss(logits, target).loss.backward();
  for (const auto& p : net->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

} // namespace

class StagePrecisionTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void initTestCase() { at::set_num_threads(2); }

  void mixedPrecisionPerStage_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("checkpoint");
    QTest::addColumn<QString>("bf16Stages");
    QTest::newRow("bf16 enc0,dec0") << "bf16:enc0,dec0" << "" << "enc0,dec0";
    QTest::newRow("bf16 enc1 checkpointed") << "bf16:enc1" << "enc1" << "enc1";
    QTest::newRow("fp32 head only") << "fp32:head" << "dec0" << "enc0,enc1,bottleneck,dec1,dec0";
  }

  void mixedPrecisionPerStage() {
    QFETCH(QString, precision);
    QFETCH(QString, checkpoint);
    QFETCH(QString, bf16Stages);
    std::set<std::string> ckpt;
    if (!checkpoint.isEmpty()) ckpt.insert(checkpoint.toStdString());
    const Step fp32 = run("fp32", ckpt);
    const Step mixed = run(precision.toStdString(), ckpt);

    const QStringList want = bf16Stages.split(',');
    QCOMPARE(mixed.outputTypes.size(), std::size_t{6});
    for (const auto& [stage, type] : mixed.outputTypes) {
      const bool bf16 = want.contains(QString::fromStdString(stage));
      QVERIFY2(type == (bf16 ? torch::kBFloat16 : torch::kFloat), stage.c_str());
      QVERIFY(fp32.outputTypes.at(stage) == torch::kFloat);
    }
    QVERIFY(mixed.logitsType == torch::kFloat);  // the loss always sees fp32 logits

    // Gradients of every parameter (fp32 stages too) close to the fp32 step's.
    QCOMPARE(mixed.grads.size(), fp32.grads.size());
    double num = 0, den = 0, worst = 0;
    for (std::size_t i = 0; i < fp32.grads.size(); ++i) {
      const auto diff = (mixed.grads[i] - fp32.grads[i]).norm().item<double>();
      const auto ref = fp32.grads[i].norm().item<double>();
      QVERIFY(ref > 0);
      num += diff * diff;
      den += ref * ref;
      // Biases sum a whole gradient map, where bf16 rounding cancels unevenly: weights only.
      if (fp32.grads[i].dim() > 1) worst = std::max(worst, diff / ref);
    }
    qInfo("relative gradient error: overall %.4f, worst weight %.4f", std::sqrt(num / den), worst);
    QVERIFY(std::sqrt(num / den) < 0.02);
    QVERIFY(worst < 0.25);  // small tensors round more; a lost or wrong gradient is ~1
    QVERIFY(std::sqrt(num / den) > 0);  // bf16 did run somewhere
  }
};

QTEST_GUILESS_MAIN(StagePrecisionTest)
#include "StagePrecisionTest.moc"
