// Split equivalence: a placement changes where stages run, never what they compute.
// The reference wires the U-Net by hand (decoder l takes encoder l), independent of the
// stage specs the executor follows, so a wrong skip connection fails here. Equivalence runs keep
// fp32 exact (TF32 off, deterministic cuDNN: checks::ExactFp32Guard).
#include "core/engine/SplitExecutor.h"
#include "core/data/Phantom.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"
#include "tests/support/GpuChecks.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <torch/serialize.h>
#include <torch/torch.h>

using namespace splitseg;

namespace {
model::UNet3dOptions tinyOptions() {
  return model::UNet3dOptions().base_channels(4).depth(4).dropout({0.2, 0.2, 0.2});
}
} // namespace

class SplitExecutorTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // Dropout on: the hand-wired reference runs each stage on its own device, so the same seed
  // gives the same masks there (CPU and CUDA generators alike). On a machine without CUDA every
  // row is the same unsplit CPU run; with CUDA the rows split across cuda:0 and cpu.
  void equivalence_data() {
    QTest::addColumn<QString>("placement");
    const QString other = engine::cudaAvailable() ? "cuda:0" : "cpu";
    QTest::newRow("unsplit") << QString();
    QTest::newRow("encoders-elsewhere") << QString("enc0=%1,enc1=%1,enc2=%1").arg(other);
    QTest::newRow("skips-cross") << QString("enc0=%1,dec0=%1,head=%1").arg(other);
    QTest::newRow("alternating") << QString("enc1=%1,bottleneck=%1,dec1=%1").arg(other);
    QTest::newRow("decoders-elsewhere") << QString("dec2=%1,dec1=%1,dec0=%1,head=%1").arg(other);
    if (engine::cudaAvailable())
      QTest::newRow("all-cuda") << QString("enc0=%1,enc1=%1,enc2=%1,bottleneck=%1,dec2=%1,dec1=%1,dec0=%1,"
                                           "head=%1").arg(other);
  }
  void equivalence() {
    QFETCH(QString, placement);
    checks::ExactFp32Guard exact;
    torch::manual_seed(7);
    auto holder = model::UNet3d(tinyOptions());
    auto& net = *holder;
    auto x = torch::randn({2, 1, 16, 16, 16});
    auto target = torch::rand({2, 1, 16, 16, 16});
    auto plan = placement::Placement::parse(placement.toStdString(), net.stageNames(), "cpu");
    engine::SplitExecutor exec(holder.ptr(), plan);

    // Reference: hand-wired, each stage on the device the placement gave it.
    torch::manual_seed(11);
    auto ref = checks::referenceForward(net, 4, x);
    (ref - target.to(ref.device())).pow(2).mean().backward();
    std::vector<torch::Tensor> refGrads;
    for (const auto& p : net.parameters()) refGrads.push_back(p.grad().clone());
    net.zero_grad();

    torch::manual_seed(11);  // same dropout masks: same random calls in the same order, per device
    auto out = exec.forward(x);
    QCOMPARE(out.device().str(), plan.deviceOf("head"));
    (out - target.to(out.device())).pow(2).mean().backward();
    const auto o = checks::compare(out, ref, 1e-5, 1e-5);
    QVERIFY2(o.within, qPrintable(QString("output max abs diff %1").arg(o.maxAbs)));
    std::size_t i = 0;
    for (const auto& p : net.parameters()) {
      QVERIFY2(p.grad().defined(), "parameter without gradient");
      QVERIFY2(checks::compare(p.grad(), refGrads[i], 1e-5, 1e-5).within, "gradient differs from the reference");
      ++i;
    }
    // Parameters live where the placement says.
    for (std::size_t s = 0; s < net.stageSpecs().size(); ++s)
      for (const auto& p : net.stageModule(s)->parameters())
        QCOMPARE(p.device().str(), plan.deviceOf(net.stageSpecs()[s].name));
  }

  // Across a real process boundary: the stages on 2 or 3 ranks (splitseg-cli launch, c10d on
  // 127.0.0.1) give the hand-wired reference's probabilities for a whole phantom.
  void acrossProcesses_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QString>("placement");
    QTest::newRow("2 ranks, encoders | rest") << 2 << "enc0=r0:cpu,enc1=r0:cpu,enc2=r0:cpu,bottleneck=r1:cpu,dec2=r1:cpu,"
                                                     "dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu";
    QTest::newRow("3 ranks, every skip crosses") << 3 << "enc0=r0:cpu,enc1=r1:cpu,enc2=r2:cpu,bottleneck=r2:cpu,"
                                                        "dec2=r1:cpu,dec1=r0:cpu,dec0=r2:cpu,head=r0:cpu";
  }
  void acrossProcesses() {
    QFETCH(int, ranks);
    QFETCH(QString, placement);
    torch::manual_seed(7);
    auto holder = model::UNet3d(tinyOptions().dropout({0, 0, 0}));
    auto& net = *holder;
    QTemporaryDir dir;
    const QString ckpt = dir.filePath("net.pt"), probs = dir.filePath("probs.pt");
    run::RunSpec spec;
    spec.architecture = net.architecture();
    spec.networkOptions = nlohmann::json::parse(net.optionsJson());
    torch::optim::Adam adam(net.parameters());
    engine::writeCheckpoint(ckpt.toStdString(), net, adam, spec, 0, "");

    QProcess p;
    p.start(SPLITSEG_CLI, {"launch", "--local-ranks", QString::number(ranks), "--rank-timeout", "30", "infer",
                           "--checkpoint", ckpt, "--synthetic", "32", "--seed", "1", "--window", "0", "--placement",
                           placement, "--probabilities", probs, "--progress", "none"});
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    torch::Tensor got;
    torch::load(got, probs.toStdString());

    data::PhantomOptions po;
    po.size = {32, 32, 32};
    po.seed = 1;
    const auto image = engine::toTensor(data::makePhantom(po).image).unsqueeze(0).unsqueeze(0);
    net.eval();
    torch::NoGradGuard noGrad;
    const auto ref = torch::sigmoid(checks::referenceForward(net, 4, image)).squeeze(0);
    QCOMPARE(got.sizes().vec(), ref.sizes().vec());
    const auto o = checks::compare(got, ref, 1e-5, 1e-5);
    QVERIFY2(o.within, qPrintable(QString("probabilities max abs diff %1").arg(o.maxAbs)));
  }

  // The shared checks (the accelerator machine runs them too): without dropout the split model
  // matches the unsplit CPU model; with dropout the per-device reference reproduces the masks.
  void sharedChecks_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("split_equivalence") << "split_equivalence";
    QTest::newRow("dropout_reproduced") << "dropout_reproduced";
  }
  void sharedChecks() {
    QFETCH(QString, name);
    const auto r = name == "split_equivalence" ? checks::splitEquivalence(checks::checkDevice())
                                                : checks::dropoutReproduced(checks::checkDevice());
    QVERIFY2(r.ok(), (r.detail + " " + r.figures.dump()).c_str());
  }

  // The tolerances catch real mismatches: a wrong skip connection, a perturbed output.
  void mismatchesAreCaught() {
    torch::manual_seed(7);
    auto holder = model::UNet3d(model::UNet3dOptions().base_channels(4).depth(4).dropout({0.0, 0.0, 0.0}));
    auto x = torch::randn({1, 1, 16, 16, 16});
    torch::NoGradGuard noGrad;
    auto ref = checks::referenceForward(*holder, 4, x);
    QVERIFY(checks::compare(ref, ref.clone(), 1e-4, 1e-5).within);
    QVERIFY(!checks::compare(ref + 1e-3, ref, 1e-4, 1e-5).within);
    // dec0 fed the skip of enc1 (upsampled) instead of enc0's: a wiring error the check must see.
    auto e0 = holder->runStage(0, {x});
    auto e1 = holder->runStage(1, {e0});
    auto e2 = holder->runStage(2, {e1});
    auto b = holder->runStage(3, {e2});
    auto d2 = holder->runStage(4, {b, e2});
    auto d1 = holder->runStage(5, {d2, e1});
    auto wrongSkip = torch::nn::functional::interpolate(
        e1.narrow(1, 0, e0.size(1)), torch::nn::functional::InterpolateFuncOptions().size(
                                         std::vector<std::int64_t>{16, 16, 16}).mode(torch::kNearest));
    auto wrong = holder->runStage(7, {holder->runStage(6, {d1, wrongSkip})});
    const auto c = checks::compare(wrong, ref, 1e-4, 1e-5);
    QVERIFY2(!c.within, qPrintable(QString("wrong skip passed (max abs diff %1)").arg(c.maxAbs)));
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

QTEST_GUILESS_MAIN(SplitExecutorTest)
#include "SplitExecutorTest.moc"
