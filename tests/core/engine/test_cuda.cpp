// CUDA-only checks; they skip cleanly on machines without a GPU.
#include "core/engine/MemoryMeter.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

class TestCuda : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void init() {
    if (!engine::cudaAvailable()) QSKIP("no CUDA device");
  }

  // A step split across cuda:0 and cpu: the allocator's peak is measured on the GPU, the
  // memory hook's on the CPU, and both are non-zero.
  void splitStepMeasuresBothDevices() {
    torch::manual_seed(1);
    std::shared_ptr<model::StagedNetwork> net = model::UNet3d(model::UNet3dOptions().base_channels(4).depth(4)).ptr();
    auto plan = placement::Placement::parse("enc0=cuda:0,enc1=cuda:0,dec1=cuda:0,dec0=cuda:0,head=cuda:0",
                                            net->stageNames(), "cpu");
    run::RunSpec o;
    o.steps = 2;
    o.patch = {32, 32, 32};
    o.setPlacement(plan);
    engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(), o);
    auto m = trainer.step();
    QCOMPARE(int(m.memory.size()), 2);
    for (const auto& d : m.memory) {
      QVERIFY2(d.peak > 0, d.device.c_str());
      QVERIFY(d.total > 0);
    }
    QVERIFY(std::isfinite(m.loss));
  }

  void bf16StepRuns() {
    torch::manual_seed(1);
    std::shared_ptr<model::StagedNetwork> net = model::UNet3d(model::UNet3dOptions().base_channels(4).depth(4)).ptr();
    run::RunSpec o;
    o.steps = 1;
    o.patch = {32, 32, 32};
    o.precision.fallback = placement::Precision::BF16;
    o.recompute = {"enc0", "dec0"};
    o.setPlacement(placement::Placement::uniform(net->stageNames(), "cuda:0"));
    engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(), o);
    QVERIFY(std::isfinite(trainer.step().loss));
    // Master weights stay fp32 under autocast.
    for (const auto& p : net->root().parameters()) QCOMPARE(p.scalar_type(), torch::kFloat);
  }
};

QTEST_GUILESS_MAIN(TestCuda)
#include "test_cuda.moc"
