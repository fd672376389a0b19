// CUDA checks (the same code tests/gpu/gpu_checks runs on the bare accelerator machine): exact
// cross-device equivalence, dropout masks reproduced per device, training cuda vs cpu, memory
// figures, exact resume, measured allowance. They skip cleanly on machines without a GPU.
#include "core/engine/MemoryMeter.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"
#include "tests/support/GpuChecks.h"
#include "tests/support/GpuOomChecks.h"

#include <QtTest>
#include <filesystem>
#include <torch/torch.h>

using namespace splitseg;

class CudaTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void init() {
    if (!engine::cudaAvailable()) QSKIP("no CUDA device");
  }

  void check_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"split_equivalence", "dropout_reproduced", "training_equivalence", "resume_exact",
                          "cuda_allowance", "out_of_memory_recovers"})
      QTest::newRow(n) << QString(n);
  }
  void check() {
    QFETCH(QString, name);
    const std::string dev = "cuda:0";
    checks::CheckResult r;
    if (name == "split_equivalence") r = checks::splitEquivalence(dev);
    else if (name == "dropout_reproduced") r = checks::dropoutReproduced(dev);
    else if (name == "training_equivalence") r = checks::trainingEquivalence(dev);
    else if (name == "resume_exact") r = checks::resumeExact(dev, std::filesystem::temp_directory_path().string());
    else if (name == "out_of_memory_recovers") r = checks::outOfMemoryRecovers(dev);
    else r = checks::allowance(dev);
    qInfo("%s", r.toJson().dump().c_str());
    QVERIFY2(r.ok(), r.detail.c_str());
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

QTEST_GUILESS_MAIN(CudaTest)
#include "CudaTest.moc"
