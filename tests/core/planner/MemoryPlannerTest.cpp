// Planner consistency, auto-placement optimality against brute force, largest-cube search.
#include "core/model/NetworkStructureOf.h"
#include "core/model/UNet3d.h"
#include "core/planner/AutoPlacer.h"
#include "core/planner/HostCpu.h"
#include "core/planner/LargestVolume.h"
#include "core/planner/MemoryPlanner.h"

#include <QtTest>

#include <algorithm>
#include <cstdlib>

using namespace splitseg;
using namespace splitseg::placement;
using namespace splitseg::planner;

namespace {

constexpr std::int64_t GiB = std::int64_t{1} << 30;
constexpr std::int64_t MiB = std::int64_t{1} << 20;

// The seed network (no norm layers), as the planner's figures and the H200's runs were taken.
const MemoryPlanner& seedPlanner() {
  static MemoryPlanner p(model::unetStructure(model::UNet3dOptions().norm(model::Norm::None)));
  return p;
}

MemoryPlanner smallPlanner(int depth, std::int64_t base = 4) {
  return MemoryPlanner(model::unetStructure(model::UNet3dOptions().base_channels(base).depth(depth).norm(model::Norm::None)));
}

PlanRequest request(std::int64_t edge, std::vector<DeviceSpec> devices, Precision p = Precision::FP32) {
  PlanRequest r;
  r.size = {edge, edge, edge};
  r.devices = std::move(devices);
  r.precision.fallback = p;
  return r;
}

} // namespace

class MemoryPlannerTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // The planner's CPU layout follows this machine's oneDNN ISA: AVX-512 (F, BW, VL, DQ) as
  // /proc/cpuinfo lists it, unless ONEDNN_MAX_CPU_ISA caps oneDNN below it.
  void hostCpuFollowsTheMachine_data() {
    QTest::addColumn<QByteArray>("cap");
    QTest::addColumn<bool>("capped");
    QTest::newRow("no cap") << QByteArray() << false;
    QTest::newRow("AVX2") << QByteArray("AVX2") << true;
    QTest::newRow("avx2, lower case") << QByteArray("avx2") << true;
    QTest::newRow("SSE41") << QByteArray("SSE41") << true;
    QTest::newRow("AVX512_CORE_BF16") << QByteArray("AVX512_CORE_BF16") << false;
    QTest::newRow("ALL") << QByteArray("ALL") << false;
  }
  void hostCpuFollowsTheMachine() {
    QFETCH(QByteArray, cap);
    QFETCH(bool, capped);
    QFile info("/proc/cpuinfo");
    if (!info.open(QIODevice::ReadOnly)) QSKIP("no /proc/cpuinfo");
    QByteArray flags;
    for (const QByteArray& line : info.readAll().split('\n'))
      if (line.startsWith("flags")) { flags = " " + line.mid(line.indexOf(':') + 1).simplified() + " "; break; }
    QVERIFY(!flags.isEmpty());
    bool avx512 = true;
    for (const char* f : {"avx512f", "avx512bw", "avx512vl", "avx512dq"}) avx512 = avx512 && flags.contains(" " + QByteArray(f) + " ");
    const QByteArray before = qgetenv("ONEDNN_MAX_CPU_ISA");
    if (cap.isEmpty()) qunsetenv("ONEDNN_MAX_CPU_ISA");
    else qputenv("ONEDNN_MAX_CPU_ISA", cap);
    const bool got = planner::probeHostCpu().avx512Core;
    if (before.isEmpty()) qunsetenv("ONEDNN_MAX_CPU_ISA");
    else qputenv("ONEDNN_MAX_CPU_ISA", before);
    QCOMPARE(got, avx512 && !capped);
    qInfo("AVX-512 core: %s", avx512 ? "yes" : "no");
  }

  void structureFromNetwork() {
    const auto& net = seedPlanner().network();
    QCOMPARE(net.stages.size(), std::size_t{10});
    QCOMPARE(net.parameters(), std::int64_t{22575329});
    model::UNet3d unet(model::UNet3dOptions().norm(model::Norm::None));
    for (std::size_t i = 0; i < net.stages.size(); ++i)
      QCOMPARE(net.stages[i].parameters, unet->stageParameterCount(i));
    // enc1: pool, dropout, conv, relu, conv, relu; dec0: up, cat, conv, relu, conv, relu.
    QCOMPARE(net.stages[1].layers.size(), std::size_t{6});
    QVERIFY(net.stages[1].layers[0].kind == LayerKind::MaxPool);
    QVERIFY(net.stages[1].layers[1].kind == LayerKind::Dropout);
    QCOMPARE(net.stages[1].layers[1].p, 0.5);
    QVERIFY(net.stages[8].layers[1].kind == LayerKind::Concat);
    QVERIFY(net.stages[8].layers[3].inplace);
  }

  // Saved activations follow from what autograd keeps: for enc0 the input plus two in-place
  // ReLU outputs (each shared with the next conv's saved input); for dec0 the concat output and
  // two ReLU outputs; for enc1 on CUDA, pool indices (int64), the dropout mask (bool), the
  // dropout output and two ReLU outputs per level-1 voxel.
  void activationsFromAutogradRules() {
    const std::int64_t e = 64, v = e * e * e;
    auto plan = seedPlanner().plan(request(e, {{"cuda:0", 16 * GiB}}));
    QCOMPARE(plan.stages[0].activationBytes, v * (4 + 2 * 32 * 4));
    QCOMPARE(plan.stages[1].activationBytes, v / 8 * (32 * 8 + 32 * 1 + 32 * 4 + 2 * 64 * 4));
    QCOMPARE(plan.stages[8].activationBytes, v * (64 * 4 + 2 * 32 * 4));
    // On CPU dropout keeps a float noise tensor instead of a bool mask.
    auto cpu = seedPlanner().plan(request(e, {{"cpu", 64 * GiB}}));
    QCOMPARE(cpu.stages[1].activationBytes - plan.stages[1].activationBytes, v / 8 * 32 * 3);
    // About 1.1 KB per voxel in all (DESIGN.md's estimate: ~1 KB).
    std::int64_t total = 0;
    for (const auto& s : plan.stages) total += s.activationBytes;
    QVERIFY(total > 1000 * v && total < 1200 * v);
  }

  void monotoneInSize_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("checkpoint");
    QTest::newRow("fp32") << "fp32" << "";
    QTest::newRow("bf16") << "bf16" << "";
    QTest::newRow("bf16 + checkpoint all") << "bf16" << "all";
    QTest::newRow("fp32 + checkpoint dec0") << "fp32" << "dec0";
  }

  void monotoneInSize() {
    QFETCH(QString, precision);
    QFETCH(QString, checkpoint);
    std::int64_t last = 0;
    for (std::int64_t e = 32; e <= 256; e += 32) {
      auto r = request(e, {{"cuda:0", 80 * GiB}}, precisionFromString(precision.toStdString()));
      if (checkpoint == "all") for (auto& n : seedPlanner().network().stageNames()) r.checkpoint.insert(n);
      else if (!checkpoint.isEmpty()) r.checkpoint.insert(checkpoint.toStdString());
      const auto p = seedPlanner().plan(r);
      QVERIFY(p.maxPeak() > last);
      last = p.maxPeak();
    }
  }

  void savingsOrdered() {
    const auto names = seedPlanner().network().stageNames();
    auto r = request(160, {{"cuda:0", 80 * GiB}});
    const auto fp32 = seedPlanner().plan(r).maxPeak();
    r.precision.fallback = Precision::BF16;
    const auto bf16 = seedPlanner().plan(r).maxPeak();
    r.checkpoint = {names.begin(), names.end()};
    const auto ck = seedPlanner().plan(r).maxPeak();
    // Compare tensor memory (the CUDA allowance is the same in all three).
    const auto allowance = seedPlanner().allowanceFor({"cuda:0", 0});
    QVERIFY(bf16 < fp32 && bf16 - allowance > (fp32 - allowance) / 2);
    qInfo("160^3 bf16: %.2f GiB, checkpointing every stage %.2f GiB (%.0f%%)", double(bf16 - allowance) / GiB,
          double(ck - allowance) / GiB, 100.0 * double(ck - allowance) / double(bf16 - allowance));
    // Checkpointing everything still has to hold the largest stage while it is recomputed, and its
    // incoming gradient until the recomputed stage's backward returns. A regression guard: the
    // saving must not shrink below 15% (what it was: docs/calibration.md, "Autograd terms").
    QVERIFY(ck - allowance < 0.85 * (bf16 - allowance));
  }

  void batchIsLinear() {
    auto r = request(64, {{"cuda:0", 80 * GiB}});
    const auto one = seedPlanner().plan(r);
    r.batch = 2;
    const auto two = seedPlanner().plan(r);
    for (std::size_t i = 0; i < one.stages.size(); ++i)
      QCOMPARE(two.stages[i].activationBytes, 2 * one.stages[i].activationBytes);
    QCOMPARE(two.devices[0].persistentBytes, one.devices[0].persistentBytes);
  }

  void splitConsistency() {
    const auto names = seedPlanner().network().stageNames();
    auto r = request(128, {{"cuda:0", 16 * GiB}, {"cuda:1", 16 * GiB}});
    r.placement = Placement::parse("dec1=cuda:1,dec0=cuda:1,head=cuda:1", names, "cuda:0");
    const auto p = seedPlanner().plan(r);
    QCOMPARE(p.devices.size(), std::size_t{2});
    std::int64_t act = 0, persistent = 0;
    for (const auto& d : p.devices) {
      std::int64_t a = 0;
      for (const auto& s : p.stages) if (s.device == d.name) a += s.activationBytes;
      QCOMPARE(d.activationBytes, a);
      QVERIFY(d.peak >= d.allowance + d.persistentBytes + d.activationBytes);
      act += d.activationBytes;
      persistent += d.persistentBytes;
    }
    // dec1 takes dec2's output and enc1's skip across; dec0 takes enc0's skip.
    QCOMPARE(p.stages[7].transferBytes, p.stages[6].outputBytes + p.stages[1].outputBytes);
    QCOMPARE(p.stages[8].transferBytes, p.stages[0].outputBytes);
    QCOMPARE(p.bytesMoved, 2 * (p.stages[7].transferBytes + p.stages[8].transferBytes));
    const auto single = seedPlanner().plan(request(128, {{"cuda:0", 16 * GiB}}));
    QCOMPARE(persistent, single.devices[0].persistentBytes);
    QVERIFY(p.maxPeak() < single.maxPeak());
  }

  void autoPlacementIsOptimal_data() {
    QTest::addColumn<int>("depth");
    QTest::addColumn<QString>("capacities");  // MiB per device
    QTest::addColumn<int>("edge");
    // Ranks (devices "r<i>:cuda:0", batch 4): their stages work at the same time under the GPipe
    // schedule, so the search's time bound is the busiest rank's, not the sum of all stages.
    QTest::addColumn<int>("micro");  // 0: devices in one process, batch 1
    QTest::newRow("depth 3, two equal") << 3 << "40,40" << 48 << 0;
    QTest::newRow("depth 3, three unequal") << 3 << "30,50,20" << 48 << 0;
    QTest::newRow("depth 3, nothing fits") << 3 << "5,5" << 48 << 0;
    QTest::newRow("depth 4, two unequal") << 4 << "60,30" << 48 << 0;
    QTest::newRow("depth 4, three equal") << 4 << "25,25,25" << 48 << 0;
    QTest::newRow("depth 3, two ranks, M=1") << 3 << "200,200" << 48 << 1;
    QTest::newRow("depth 3, two ranks, M=4") << 3 << "200,200" << 48 << 4;
    QTest::newRow("depth 4, three ranks, M=4") << 4 << "200,200,200" << 48 << 4;
    QTest::newRow("depth 4, two tight ranks, M=2") << 4 << "120,90" << 48 << 2;
  }

  void autoPlacementIsOptimal() {
    QFETCH(int, depth);
    QFETCH(QString, capacities);
    QFETCH(int, edge);
    QFETCH(int, micro);
    const MemoryPlanner planner = smallPlanner(depth);
    std::vector<DeviceSpec> devices;
    int i = 0;
    for (const auto& c : capacities.split(',')) {
      const std::string n = std::to_string(i++);
      devices.push_back({micro > 0 ? "r" + n + ":cuda:0" : "cuda:" + n, c.toLongLong() * MiB, 0, true});
    }
    auto req = request(edge, devices);
    if (micro > 0) {
      req.batch = 4;
      req.microBatches = micro;
    }
    const AutoPlaceResult got = AutoPlacer(planner).place(req);
    QVERIFY(got.exact);
    // Brute force over every assignment.
    const auto names = planner.network().stageNames();
    const std::size_t nd = devices.size();
    std::size_t total = 1;
    for (std::size_t s = 0; s < names.size(); ++s) total *= nd;
    MemoryPlan best;
    bool have = false;
    for (std::size_t code = 0; code < total; ++code) {
      PlanRequest r = req;
      r.placement = Placement::uniform(names, devices.front().name);
      std::size_t c = code;
      for (const auto& n : names) {
        r.placement.assign(n, devices[c % nd].name);
        c /= nd;
      }
      MemoryPlan p = planner.plan(r);
      if (!have || AutoPlacer::better(p, best, devices, planner.network())) { best = p; have = true; }
    }
    QVERIFY2(!AutoPlacer::better(best, got.plan, devices, planner.network()),
             qPrintable(QString("brute force found a better placement: peak %1 vs %2")
                            .arg(best.maxPeak()).arg(got.plan.maxPeak())));
    QCOMPARE(got.plan.fits, best.fits);
    QVERIFY(got.evaluated <= static_cast<std::int64_t>(total) + 512);
  }

  void heuristicBeyondFourDevices() {
    const MemoryPlanner planner = smallPlanner(3);
    std::vector<DeviceSpec> devices;
    for (int i = 0; i < 5; ++i) devices.push_back({"cuda:" + std::to_string(i), 20 * MiB, 0, true});
    const auto got = AutoPlacer(planner).place(request(48, devices));
    QVERIFY(!got.exact);
    QVERIFY(got.method.find("heuristic") != std::string::npos);
    QVERIFY(got.plan.fits);
  }

  // One stage in bf16 halves what that stage keeps for backward; stages that do not read its
  // output plan exactly as before (a reader in fp32 casts the bf16 tensor up and keeps the copy).
  // Not so at 8^3 in the bottleneck: its bf16 weight copies, kept for backward, outweigh the
  // activations saved, and the plan says so.
  void oneBf16StageLowersOnlyItsActivations_data() {
    QTest::addColumn<QString>("stage");
    QTest::addColumn<QString>("device");
    QTest::newRow("enc1 cpu") << "enc1" << "cpu";
    QTest::newRow("enc2 cpu") << "enc2" << "cpu";
    QTest::newRow("dec0 cpu") << "dec0" << "cpu";
    QTest::newRow("enc0 cuda") << "enc0" << "cuda:0";
    QTest::newRow("dec1 cuda") << "dec1" << "cuda:0";
  }
  void oneBf16StageLowersOnlyItsActivations() {
    QFETCH(QString, stage);
    QFETCH(QString, device);
    // A CPU whose bf16 convolutions run in oneDNN (AVX-512), whatever this machine is: without it
    // LibTorch's native bf16 kernels unfold columns that can outweigh what the stage saves.
    PlannerOptions avx512;
    avx512.cpuAvx512 = true;
    const MemoryPlanner planner(model::unetStructure(model::UNet3dOptions().base_channels(8).depth(4).norm(model::Norm::None)), avx512);
    auto r = request(64, {{device.toStdString(), 64 * GiB}});
    const MemoryPlan fp32 = planner.plan(r);
    r.precision.stages[stage.toStdString()] = Precision::BF16;
    const MemoryPlan mixed = planner.plan(r);
    QCOMPARE(QString::fromStdString(mixed.precisionText), "bf16:" + stage);
    for (std::size_t i = 0; i < mixed.stages.size(); ++i) {
      const auto& before = fp32.stages[i];
      const auto& after = mixed.stages[i];
      const auto& inputs = planner.network().stages[i].inputs;
      const bool reads = std::find(inputs.begin(), inputs.end(), stage.toStdString()) != inputs.end();
      QCOMPARE(after.precision == Precision::BF16, after.name == stage.toStdString());
      if (after.name == stage.toStdString()) {
        qInfo("%s: %lld -> %lld bytes", after.name.c_str(), (long long)before.activationBytes, (long long)after.activationBytes);
        QVERIFY2(after.activationBytes < before.activationBytes, after.name.c_str());
      } else if (!reads) {
        QCOMPARE(after.activationBytes, before.activationBytes);
      }
      QCOMPARE(after.parameterBytes, before.parameterBytes);  // weights stay fp32
    }
    QVERIFY(mixed.devices[0].activationBytes < fp32.devices[0].activationBytes);
    QVERIFY(mixed.devices[0].peak <= fp32.devices[0].peak);
  }

  void stagePrecisionText_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("bf16Stages");  // effective, comma-separated
    QTest::addColumn<QString>("canonical");
    QTest::newRow("fp32") << "fp32" << "" << "fp32";
    QTest::newRow("bf16") << "bf16" << "enc0,enc1,bottleneck,dec1,dec0,head" << "bf16";
    QTest::newRow("bf16 list") << "bf16:dec0,enc0" << "enc0,dec0" << "bf16:enc0,dec0";
    QTest::newRow("fp32 list") << "fp32:head" << "enc0,enc1,bottleneck,dec1,dec0" << "fp32:head";
    QTest::newRow("unknown stage") << "bf16:enc0,enc9" << "error" << "unknown stage 'enc9'";
    QTest::newRow("unknown precision") << "fp16:enc0" << "error" << "unknown precision 'fp16'";
    QTest::newRow("empty stage") << "bf16:" << "error" << "empty stage name";
  }
  void stagePrecisionText() {
    QFETCH(QString, text);
    QFETCH(QString, bf16Stages);
    QFETCH(QString, canonical);
    const auto names = smallPlanner(3).network().stageNames();
    if (bf16Stages == "error") {
      try {
        StagePrecisions::parse(text.toStdString(), names);
        QFAIL("accepted");
      } catch (const std::exception& e) {
        QVERIFY2(QString(e.what()).contains(canonical), e.what());
        QVERIFY(!QString(e.what()).contains('\n'));
      }
      return;
    }
    const auto sp = StagePrecisions::parse(text.toStdString(), names);
    QStringList got;
    for (const auto& n : names)
      if (sp.of(n) == Precision::BF16) got << QString::fromStdString(n);
    QCOMPARE(got.join(','), bf16Stages);
    QCOMPARE(QString::fromStdString(sp.toString(names)), canonical);  // in the network's order
    QCOMPARE(StagePrecisions::parse(sp.toString(), names).toString(names), sp.toString(names));  // round trip
  }

  void largestCube_data() {
    QTest::addColumn<bool>("autoPlace");
    QTest::addColumn<QString>("precision");
    QTest::newRow("given placement") << false << "fp32";
    QTest::newRow("auto fp32") << true << "fp32";
    QTest::newRow("auto bf16") << true << "bf16";
  }

  void largestCube() {
    QFETCH(bool, autoPlace);
    QFETCH(QString, precision);
    const auto& planner = seedPlanner();
    auto r = request(0, {{"cuda:0", 16 * GiB}, {"cuda:1", 16 * GiB}}, precisionFromString(precision.toStdString()));
    r.placement = Placement::parse("dec0=cuda:1,head=cuda:1", planner.network().stageNames(), "cuda:0");
    const LargestVolume lv = planner::largestCube(planner, r, autoPlace);
    QVERIFY(lv.edge > 0);
    QCOMPARE(lv.edge % 16, std::int64_t{0});
    QVERIFY(lv.plan.fits);
    QVERIFY(!lv.next.fits);
    QCOMPARE(lv.next.size[0], lv.edge + 16);
    QVERIFY(!lv.next.limitingStage.empty());
    if (autoPlace) {  // auto-placement never does worse than the fixed placement
      const LargestVolume fixed = planner::largestCube(planner, r, false);
      QVERIFY(lv.edge >= fixed.edge);
    }
  }
};

QTEST_GUILESS_MAIN(MemoryPlannerTest)
#include "MemoryPlannerTest.moc"
