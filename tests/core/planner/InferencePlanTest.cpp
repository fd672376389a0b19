// The planner's inference mode against engine::Inferer::predict on the CPU: every LibTorch
// allocation of a whole prediction (the network's passes, the windows, the accumulators, the
// probabilities and labels) counted by the engine's CPU memory counter, against the host CPU's
// planned peak. Also the windows: the planner and the Inferer cut the volume the same way.
#include "core/base/Error.h"
#include "core/engine/Inferer.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/SplitExecutor.h"
#include "core/model/NetworkStructureOf.h"
#include "core/model/UNet3d.h"
#include "core/planner/InferenceMemory.h"
#include "core/planner/MemoryPlanner.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

namespace {
using Dims = std::array<std::int64_t, 3>;
Dims dims(const QString& s) {  // "DxHxW" or "N"
  const auto p = s.split('x');
  if (p.size() == 1) return {p[0].toLongLong(), p[0].toLongLong(), p[0].toLongLong()};
  return {p[0].toLongLong(), p[1].toLongLong(), p[2].toLongLong()};
}
} // namespace

class InferencePlanTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void initTestCase() { at::set_num_threads(2); }

  void peakMatchesMeasurement_data() {
    QTest::addColumn<int>("base");
    QTest::addColumn<int>("depth");
    QTest::addColumn<QString>("norm");
    QTest::addColumn<int>("classes");
    QTest::addColumn<QString>("volume");  // D x H x W
    QTest::addColumn<QString>("window");  // D x H x W; "0": the whole volume
    QTest::addColumn<int>("perPass");
    QTest::addColumn<QString>("precision");
    QTest::addColumn<bool>("channelsLast");  // InferOptions::cpuChannelsLast (the default: on)
    QTest::addColumn<int>("threads");  // intra-op threads (DeviceSpec::cpuThreads)
    QTest::addColumn<QString>("mirror");  // InferOptions::mirror: the axes ("xyz", "" for none)
    QTest::newRow("b8 d3 whole 32^3") << 8 << 3 << "none" << 1 << "32" << "0" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 whole 30x28x26 padded") << 8 << 3 << "none" << 1 << "30x28x26" << "0" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 48^3 in 32^3") << 8 << 3 << "none" << 1 << "48" << "32" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 48^3 in 32^3 x2") << 8 << 3 << "none" << 1 << "48" << "32" << 2 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 28x40x44 in 32^3 padded") << 8 << 3 << "none" << 1 << "28x40x44" << "32" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 3 classes 48^3 in 32^3") << 8 << 3 << "none" << 3 << "48" << "32" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 NCDHW 48^3 in 32^3") << 8 << 3 << "none" << 1 << "48" << "32" << 1 << "fp32" << false << 2 << "";
    QTest::newRow("b8 d3 NCDHW 48^3 in 32^3 x2") << 8 << 3 << "none" << 1 << "48" << "32" << 2 << "fp32" << false << 2 << "";
    QTest::newRow("b16 d5 instance 64^3 in 32^3") << 16 << 5 << "instance" << 1 << "64" << "32" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b16 d5 instance whole 48^3") << 16 << 5 << "instance" << 2 << "48" << "0" << 1 << "fp32" << true << 2 << "";
    // Base 4: layers with fewer than 8 channels leave oneDNN's channels-last kernels (CpuConvScratch.cpp).
    QTest::newRow("b4 d3 whole 32^3") << 4 << 3 << "none" << 1 << "32" << "0" << 1 << "fp32" << true << 2 << "";
    QTest::newRow("b4 d5 48^3 in 32^3 x2") << 4 << 5 << "none" << 1 << "48" << "32" << 2 << "fp32" << true << 2 << "";
    QTest::newRow("b8 d3 bf16 48^3 in 32^3") << 8 << 3 << "none" << 1 << "48" << "32" << 1 << "bf16" << true << 2 << "";
    // One thread (each of two ranks on two cores): the 1x1x1 head runs LibTorch's own kernel, not
    // oneDNN's blocked one, which a plan for two threads would count.
    QTest::newRow("b4 d3 whole 32^3, 1 thread") << 4 << 3 << "none" << 1 << "32" << "0" << 1 << "fp32" << true << 1 << "";
    QTest::newRow("b8 d3 48^3 in 32^3, 1 thread") << 8 << 3 << "none" << 1 << "48" << "32" << 1 << "fp32" << true << 1 << "";
    // Test-time mirroring: the flipped input and the sum of the logits beside each pass.
    QTest::newRow("b8 d3 whole 32^3 mirrored") << 8 << 3 << "none" << 1 << "32" << "0" << 1 << "fp32" << true << 2 << "xyz";
    QTest::newRow("b8 d3 whole 30x28x26 padded mirrored x") << 8 << 3 << "none" << 1 << "30x28x26" << "0" << 1 << "fp32" << true << 2 << "x";
    QTest::newRow("b8 d3 48^3 in 32^3 x2 mirrored") << 8 << 3 << "none" << 1 << "48" << "32" << 2 << "fp32" << true << 2 << "xyz";
    QTest::newRow("b8 d3 3 classes 28x40x44 in 32^3 mirrored yz") << 8 << 3 << "none" << 3 << "28x40x44" << "32" << 1 << "fp32" << true << 2 << "yz";
    QTest::newRow("b4 d3 whole 3 classes 24^3 mirrored") << 4 << 3 << "none" << 3 << "24" << "0" << 1 << "fp32" << true << 2 << "xyz";
  }

  void peakMatchesMeasurement() {
    QFETCH(int, base);
    QFETCH(int, depth);
    QFETCH(QString, norm);
    QFETCH(int, classes);
    QFETCH(QString, volume);
    QFETCH(QString, window);
    QFETCH(int, perPass);
    QFETCH(QString, precision);
    QFETCH(bool, channelsLast);
    QFETCH(int, threads);
    QFETCH(QString, mirror);
    at::set_num_threads(threads);
    const auto restore = qScopeGuard([] { at::set_num_threads(2); });
    torch::manual_seed(0);
    model::UNet3d net(model::UNet3dOptions().base_channels(base).depth(depth).out_channels(classes).norm(
        model::normFromString(norm.toStdString())));
    const auto names = net->stageNames();
    const auto precisions = placement::StagePrecisions::parse(precision.toStdString(), names);
    engine::SplitExecutor executor(net.ptr(), placement::Placement::uniform(names, "cpu"), precisions);
    engine::Inferer inferer(executor);
    const Dims v = dims(volume), w = window == "0" ? Dims{0, 0, 0} : dims(window);
    engine::InferOptions options;
    options.window = {w[2], w[1], w[0]};  // x, y, z
    options.batch = perPass;
    options.cpuChannelsLast = channelsLast;
    options.mirror = {mirror.contains('x'), mirror.contains('y'), mirror.contains('z')};
    const auto image = torch::randn({1, v[0], v[1], v[2]});
    inferer.predict(image, options);  // warm-up: lazy initialisation outside the measurement
    // The counter sees only the frees of what it saw allocated: the weights' conversion inside
    // predict would free the old copies unseen and count them twice. Converted here instead (the
    // Inferer then keeps them so), the weights weigh the same before and during the prediction.
    if (channelsLast) executor.setCpuChannelsLast(true);
    engine::CpuMemoryCounter counter;
    {
      engine::CpuMemoryScope scope(counter);
      inferer.predict(image, options);
    }
    // The counter starts at zero: the parameters and the image existed before.
    std::int64_t parameterBytes = 0;
    for (const auto& p : net->parameters()) parameterBytes += p.numel() * 4;
    const double measured = static_cast<double>(counter.peak() + parameterBytes + image.numel() * 4);

    planner::MemoryPlanner planner(model::networkStructure(*net));
    planner::PlanRequest req;
    req.inference = true;
    req.volume = v;
    req.size = w;
    req.batch = perPass;
    req.precision = precisions;
    req.cpuChannelsLast = channelsLast;
    req.mirror = !mirror.isEmpty();
    req.devices = {{"cpu", std::int64_t{64} << 30}};
    req.devices.front().cpuThreads = threads;
    const auto plan = planner.plan(req);
    const auto& d = plan.devices.at(0);
    const double predicted = static_cast<double>(d.peak - d.allowance);
    const double error = (predicted - measured) / measured;
    qInfo("%-32s predicted %8.2f MiB  measured %8.2f MiB  error %+5.1f%%  (%lld windows, host buffers %.2f MiB)",
          QTest::currentDataTag(), predicted / (1 << 20), measured / (1 << 20), 100 * error,
          static_cast<long long>(plan.windows), plan.hostBytes / double(1 << 20));
    QVERIFY(plan.inference);
    QCOMPARE(d.persistentBytes, parameterBytes);  // parameters only: no gradients, no optimizer state
    // Held to 2%, bf16 to 5% (CpuConvScratch.cpp's bf16 kernels are fitted less closely); how
    // close the rows came and what each model term fixed: docs/calibration.md, "Inference".
    const double tolerance = precision == "fp32" ? 0.02 : 0.05;
    QVERIFY2(std::abs(error) <= tolerance, qPrintable(QString("prediction off by more than %1%").arg(tolerance * 100)));
  }

  // The planner's windows are the Inferer's: a volume whose every window is marked shows each
  // origin the grid names, and no voxel is left out.
  void gridCoversVolume_data() {
    QTest::addColumn<QString>("volume");
    QTest::addColumn<QString>("window");
    QTest::addColumn<double>("overlap");
    QTest::addColumn<int>("windows");
    QTest::newRow("48^3 in 32^3, half overlap") << "48" << "32" << 0.5 << 8;
    QTest::newRow("28x40x44 in 32^3") << "28x40x44" << "32" << 0.5 << 4;
    QTest::newRow("100x64x64 in 64^3, no overlap") << "100x64x64" << "64" << 0.0 << 2;
    QTest::newRow("16^3 in 64^3 shrinks") << "16" << "64" << 0.5 << 1;
  }

  void gridCoversVolume() {
    QFETCH(QString, volume);
    QFETCH(QString, window);
    QFETCH(double, overlap);
    QFETCH(int, windows);
    const auto g = planner::inferenceGrid(dims(volume), dims(window), 8, overlap);
    QCOMPARE(static_cast<int>(g.origins.size()), windows);
    auto covered = torch::zeros({g.padded[0], g.padded[1], g.padded[2]}, torch::kInt);
    for (const auto& o : g.origins) {
      for (int a = 0; a < 3; ++a) QVERIFY(o[a] + g.window[a] <= g.padded[a]);
      covered.slice(0, o[0], o[0] + g.window[0]).slice(1, o[1], o[1] + g.window[1]).slice(2, o[2], o[2] + g.window[2]) += 1;
    }
    QCOMPARE(covered.min().item<int>() > 0, true);
  }

  void refusesBadWindows() {
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, planner::inferenceGrid({32, 32, 32}, {30, 32, 32}, 8, 0.5));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, planner::inferenceGrid({0, 32, 32}, {0, 0, 0}, 8, 0.5));
  }
};

QTEST_GUILESS_MAIN(InferencePlanTest)
#include "InferencePlanTest.moc"
