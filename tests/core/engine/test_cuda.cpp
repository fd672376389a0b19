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
    engine::TrainerOptions o;
    o.steps = 2;
    o.patch = {32, 32, 32};
    engine::Trainer trainer(net, plan, std::make_shared<data::PhantomSource>(), o);
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
    engine::TrainerOptions o;
    o.steps = 1;
    o.patch = {32, 32, 32};
    engine::ExecutorOptions exec;
    exec.precision = engine::Precision::BF16;
    exec.checkpointStages = {"enc0", "dec0"};
    engine::Trainer trainer(net, placement::Placement::uniform(net->stageNames(), "cuda:0"),
                            std::make_shared<data::PhantomSource>(), o, exec);
    QVERIFY(std::isfinite(trainer.step().loss));
    // Master weights stay fp32 under autocast.
    for (const auto& p : net->root().parameters()) QCOMPARE(p.scalar_type(), torch::kFloat);
  }
};

QTEST_GUILESS_MAIN(TestCuda)
#include "test_cuda.moc"
