// The planner's predicted peak against the peak measured through the engine's CPU memory
// counter (every LibTorch CPU allocation and free) over a real training step: split executor,
// Dice + BCE loss, backward, Adam. Must agree within 2% (fp32) or the row's own bound (bf16).
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/NetworkStructureOf.h"
#include "core/model/UNet3d.h"
#include "core/planner/MemoryPlanner.h"

#include <QtTest>
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <sstream>

using namespace splitseg;

class PlannerMeasuredTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void initTestCase() { at::set_num_threads(2); }

  void predictionMatchesMeasurement_data() {
    QTest::addColumn<int>("base");
    QTest::addColumn<int>("depth");
    QTest::addColumn<int>("edge");
    QTest::addColumn<int>("batch");
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("checkpoint");
    QTest::addColumn<QString>("norm");
    QTest::addColumn<double>("tolerance");
    QTest::addColumn<bool>("channelsLast");
    QTest::newRow("b8 d3 32^3") << 8 << 3 << 32 << 1 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3") << 8 << 3 << 48 << 1 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b4 d4 48^3") << 4 << 4 << 48 << 1 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 32^3 batch 2") << 8 << 3 << 32 << 2 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 32^3 batch 4") << 8 << 3 << 32 << 4 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 ckpt dec0") << 8 << 3 << 48 << 1 << "fp32" << "dec0" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 ckpt all") << 8 << 3 << 48 << 1 << "fp32" << "all" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 32^3 bf16") << 8 << 3 << 32 << 1 << "bf16" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 bf16") << 8 << 3 << 48 << 1 << "bf16" << "" << "none" << 0.10 << false;
    QTest::newRow("b4 d4 48^3 bf16 ckpt all") << 4 << 4 << 48 << 1 << "bf16" << "all" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 bf16 ckpt all") << 8 << 3 << 48 << 1 << "bf16" << "all" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 bf16 ckpt dec0") << 8 << 3 << 48 << 1 << "bf16" << "dec0" << "none" << 0.10 << false;
    // Base 16: channels fill oneDNN's 16-channel blocks (base 4 and 8 are padded up to them).
    QTest::newRow("b16 d3 32^3 bf16") << 16 << 3 << 32 << 1 << "bf16" << "" << "none" << 0.10 << false;
    // Depth 5 with the seed's dropout (0.5/0.5/0.3/0.3 after each pool).
    QTest::newRow("b4 d5 48^3") << 4 << 5 << 48 << 1 << "fp32" << "" << "none" << 0.10 << false;
    QTest::newRow("b4 d5 32^3 bf16") << 4 << 5 << 32 << 1 << "bf16" << "" << "none" << 0.10 << false;
    // A bf16 head (1x1x1) at batch > 1: oneDNN keeps one fp32 accumulator per thread, not per sample.
    QTest::newRow("b4 d3 16^3 batch 4 bf16:head") << 4 << 3 << 16 << 4 << "bf16:head" << "" << "none" << 0.10 << false;
    QTest::newRow("b4 d3 24^3 batch 4 bf16:head instance") << 4 << 3 << 24 << 4 << "bf16:head" << "" << "instance" << 0.10 << false;
    QTest::newRow("b4 d3 32^3 batch 2 bf16:head") << 4 << 3 << 32 << 2 << "bf16:head" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 32^3 batch 4 bf16") << 8 << 3 << 32 << 4 << "bf16" << "" << "none" << 0.10 << false;
    QTest::newRow("b4 d4 32^3 batch 3 bf16 ckpt all") << 4 << 4 << 32 << 3 << "bf16" << "all" << "none" << 0.10 << false;
    // Per-stage precision: fp32 stages cast their bf16 inputs up.
    QTest::newRow("b8 d3 48^3 bf16:enc0,dec0") << 8 << 3 << 48 << 1 << "bf16:enc0,dec0" << "" << "none" << 0.10 << false;
    QTest::newRow("b8 d3 48^3 fp32:head ckpt dec0") << 8 << 3 << 48 << 1 << "fp32:head" << "dec0" << "none" << 0.10 << false;
    // Instance norm returns a view; the in-place ReLU on it makes autograd's CopySlices
    // (planner: LayerSpec::outputIsView). Without that model the seed network at 64^3 with
    // instance norm is under-predicted by more than the 5% it is held to here.
    QTest::newRow("b16 d5 64^3 instance") << 16 << 5 << 64 << 1 << "fp32" << "" << "instance" << 0.05 << false;
    QTest::newRow("b8 d3 48^3 instance") << 8 << 3 << 48 << 1 << "fp32" << "" << "instance" << 0.05 << false;
    QTest::newRow("b8 d3 32^3 batch 2 instance") << 8 << 3 << 32 << 2 << "fp32" << "" << "instance" << 0.10 << false;
    // Recomputed stages ending in that ReLU: the checkpoint's backward holds the incoming gradient
    // beside the view's AsStridedBackward copy (the default network with checkpointing).
    QTest::newRow("b8 d3 48^3 instance ckpt all") << 8 << 3 << 48 << 1 << "fp32" << "all" << "instance" << 0.05 << false;
    QTest::newRow("b8 d3 48^3 instance ckpt enc0") << 8 << 3 << 48 << 1 << "fp32" << "enc0" << "instance" << 0.05 << false;
    QTest::newRow("b8 d3 32^3 batch 2 instance ckpt all") << 8 << 3 << 32 << 2 << "fp32" << "all" << "instance" << 0.05 << false;
    QTest::newRow("b8 d3 48^3 batch norm") << 8 << 3 << 48 << 1 << "fp32" << "" << "batch" << 0.10 << false;
    // Channels-last weights (RunSpec::cpuLayout; the default on CPUs without AVX-512): oneDNN's
    // NDHWC kernels, plain copies where native kernels or instance norm meet NDHWC tensors.
    QTest::newRow("cl b8 d3 32^3") << 8 << 3 << 32 << 1 << "fp32" << "" << "none" << 0.10 << true;
    QTest::newRow("cl b8 d3 48^3") << 8 << 3 << 48 << 1 << "fp32" << "" << "none" << 0.10 << true;
    QTest::newRow("cl b8 d3 32^3 batch 2") << 8 << 3 << 32 << 2 << "fp32" << "" << "none" << 0.10 << true;
    QTest::newRow("cl b8 d3 32^3 batch 4") << 8 << 3 << 32 << 4 << "fp32" << "" << "none" << 0.10 << true;
    QTest::newRow("cl b8 d3 48^3 ckpt all") << 8 << 3 << 48 << 1 << "fp32" << "all" << "none" << 0.10 << true;
    QTest::newRow("cl b4 d5 48^3") << 4 << 5 << 48 << 1 << "fp32" << "" << "none" << 0.10 << true;
    QTest::newRow("cl b16 d5 64^3 instance") << 16 << 5 << 64 << 1 << "fp32" << "" << "instance" << 0.05 << true;
    QTest::newRow("cl b8 d3 32^3 batch 2 instance") << 8 << 3 << 32 << 2 << "fp32" << "" << "instance" << 0.10 << true;
    QTest::newRow("cl b8 d3 48^3 batch norm") << 8 << 3 << 48 << 1 << "fp32" << "" << "batch" << 0.10 << true;
    QTest::newRow("cl b8 d3 48^3 bf16:enc0,dec0") << 8 << 3 << 48 << 1 << "bf16:enc0,dec0" << "" << "none" << 0.10 << true;
  }

  void predictionMatchesMeasurement() {
    QFETCH(int, base);
    QFETCH(int, depth);
    QFETCH(int, edge);
    QFETCH(int, batch);
    QFETCH(QString, precision);
    QFETCH(QString, checkpoint);
    QFETCH(QString, norm);
    QFETCH(double, tolerance);
    QFETCH(bool, channelsLast);
    torch::manual_seed(0);
    model::UNet3d net(model::UNet3dOptions().base_channels(base).depth(depth).norm(model::normFromString(norm.toStdString())));
    net->train();
    const auto names = net->stageNames();
    std::set<std::string> ckpt;
    if (checkpoint == "all") ckpt = {names.begin(), names.end()};
    else if (!checkpoint.isEmpty()) ckpt.insert(checkpoint.toStdString());

    const auto precisions = placement::StagePrecisions::parse(precision.toStdString(), names);
    engine::SplitExecutor executor(net.ptr(), placement::Placement::uniform(names, "cpu"), precisions, ckpt);
    if (channelsLast) executor.setCpuChannelsLast(true, true);  // as the Trainer does, before Adam
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
    auto step = [&] {
      auto input = torch::randn({batch, 1, edge, edge, edge});
      auto target = torch::randint(0, 2, {batch, edge, edge, edge}, torch::kLong);
      auto logits = executor.forward(input);
      auto loss = engine::segmentationLoss(logits, target);
      loss.loss.backward();
      adam.step();
    };
    adam.zero_grad();
    step();  // warm-up: Adam state and lazy initialisation happen outside the measurement
    adam.zero_grad();
    engine::CpuMemoryCounter counter;
    {
      engine::CpuMemoryScope scope(counter);
      step();
    }
    const double measured = static_cast<double>(counter.peak());

    planner::MemoryPlanner planner(model::networkStructure(*net));
    planner::PlanRequest req;
    req.size = {edge, edge, edge};
    req.batch = batch;
    req.precision = precisions;
    req.checkpoint = ckpt;
    req.cpuChannelsLast = channelsLast;
    req.devices = {{"cpu", std::int64_t{64} << 30}};
    const auto plan = planner.plan(req);
    // The counter starts at zero inside the step: parameters and Adam state existed before.
    const double predicted = static_cast<double>(plan.devices[0].peak - plan.devices[0].allowance -
                                                 plan.devices[0].persistentBytes);
    const double error = (predicted - measured) / measured;
    qInfo("%-30s predicted %9.2f MiB  measured %9.2f MiB  error %+5.1f%%  (peak at %s %s)",
          QTest::currentDataTag(), predicted / (1 << 20), measured / (1 << 20), 100 * error,
          plan.devices[0].peakStage.c_str(), plan.devices[0].peakPhase.c_str());
    // The fp32 models were traced layer by layer on AVX2 and AVX-512 hosts (CpuConvScratch.cpp; how
    // close each row came: docs/calibration.md, "CPU convolutions"). Held to 2%; the bf16 rows keep
    // their own bounds (AMX, see CMakeLists.txt).
    if (precision == "fp32") tolerance = std::min(tolerance, 0.02);
    QVERIFY2(std::abs(error) <= tolerance, qPrintable(QString("prediction off by more than %1%").arg(tolerance * 100)));
  }
};

QTEST_GUILESS_MAIN(PlannerMeasuredTest)
#include "PlannerMeasuredTest.moc"
