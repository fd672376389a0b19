// The planner's step-time model: stages in one process run one after another; stages on ranks run
// the GPipe schedule at the same time. Plans built by hand (each device computes 1 FLOP/s, so a
// stage's FLOPs are its seconds) against finish times worked out by hand.
#include "core/planner/StepTime.h"

#include <QtTest>

using namespace splitseg::placement;
using namespace splitseg::planner;

namespace {
struct Case {
  std::vector<std::string> devices;       // per stage
  std::vector<double> seconds;            // per stage, forward + backward at M=1
  std::vector<std::vector<std::string>> inputs;  // per stage (default: the previous stage)
  std::set<int> checkpointed;
  std::int64_t bytes0 = 0;                // stage 0's output bytes per micro-batch
};

StepTime predict(const Case& c, int micro) {
  NetworkStructure net;
  MemoryPlan plan;
  plan.batch = 4;
  plan.microBatches = micro;
  std::vector<DeviceSpec> devices;
  for (std::size_t i = 0; i < c.devices.size(); ++i) {
    const std::string name = "s" + std::to_string(i);
    StageStructure st;
    st.name = name;
    st.inputs = i < c.inputs.size() ? c.inputs[i] : std::vector<std::string>{i == 0 ? "input" : "s" + std::to_string(i - 1)};
    net.stages.push_back(st);
    StagePlan sp;
    sp.name = name;
    sp.device = c.devices[i];
    sp.flops = c.seconds[i];
    sp.checkpointed = c.checkpointed.count(static_cast<int>(i)) > 0;
    sp.outputBytes = i == 0 ? c.bytes0 : 0;
    plan.stages.push_back(sp);
    DeviceSpec d;
    d.name = c.devices[i];
    d.flopsPerSecond = 1.0;
    devices.push_back(d);
  }
  return predictStepTime(plan, devices, net);
}
} // namespace

class StepTimeTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void finishTime_data() {
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("micro");
    QTest::addColumn<double>("expected");
    QTest::addColumn<int>("ranks");  // pipelined ranks reported
    // One process: the stages in turn, whatever M.
    QTest::newRow("one process, 1 + 3 s") << 0 << 1 << 4.0 << 0;
    // Two ranks, equal stages c: GPipe's (M + 1) c / M.
    QTest::newRow("two ranks 1 + 1 s, M=1") << 1 << 1 << 2.0 << 2;
    QTest::newRow("two ranks 1 + 1 s, M=2") << 1 << 2 << 1.5 << 2;
    QTest::newRow("two ranks 1 + 1 s, M=4") << 1 << 4 << 1.25 << 2;
    // A device without a rank is in rank 0's process (the workstation's "cpu" beside "r1:cpu").
    QTest::newRow("cpu + r1:cpu 1 + 1 s, M=4") << 7 << 4 << 1.25 << 2;
    // Unequal: the cheap rank's one micro-batch plus the whole of the dear one, either way round.
    QTest::newRow("two ranks 1 + 3 s, M=4") << 2 << 4 << 3.25 << 2;
    QTest::newRow("two ranks 3 + 1 s, M=4") << 3 << 4 << 3.25 << 2;
    // Stage 0's output takes 0.5 s over the ranks' link, and its gradient 0.5 s back.
    QTest::newRow("two ranks 1 + 1 s, 0.5 s link, M=1") << 4 << 1 << 3.0 << 2;
    // Stage 1 recomputed: its forward is a quarter of its time, not a third. Cells (seconds x 24):
    // r0 fwd 0-4, 4-8; r1 fwd 4-7, 8-11; r1 bwd 11-20, 20-29; r0 bwd 20-28, 29-37.
    QTest::newRow("two ranks 1 + 1 s, stage 1 recomputed, M=2") << 5 << 2 << 37.0 / 24 << 2;
    // r0, r1, r0 with a skip from stage 0 to stage 2. Cells in sixths of a second: forward r0
    // 0-1, 1-2 (stage 0), r1 1-2, 2-3, r0 3-4, 4-5 (stage 2); backward r0 4-6, 6-8 (stage 2), r1
    // 6-8, 8-10, r0 8-10, 10-12 (stage 0, after both its readers' gradients).
    QTest::newRow("r0, r1, r0 with a skip, 1 s each, M=2") << 6 << 2 << 2.0 << 2;
    QTest::newRow("r0, r1, r0 with a skip, 1 s each, M=1") << 6 << 1 << 3.0 << 2;
  }
  void finishTime() {
    QFETCH(int, row);
    QFETCH(int, micro);
    QFETCH(double, expected);
    QFETCH(int, ranks);
    const double link = linkBytesPerSecond("r0:cpu", "r1:cpu");
    const std::vector<Case> cases{
        {{"cpu", "cpu"}, {1, 3}, {}, {}, 0},
        {{"r0:cpu", "r1:cpu"}, {1, 1}, {}, {}, 0},
        {{"r0:cpu", "r1:cpu"}, {1, 3}, {}, {}, 0},
        {{"r0:cpu", "r1:cpu"}, {3, 1}, {}, {}, 0},
        {{"r0:cpu", "r1:cpu"}, {1, 1}, {}, {}, static_cast<std::int64_t>(0.5 * link)},
        {{"r0:cpu", "r1:cpu"}, {1, 1}, {}, {1}, 0},
        {{"r0:cpu", "r1:cpu", "r0:cpu"}, {1, 1, 1}, {{"input"}, {"s0"}, {"s1", "s0"}}, {}, 0},
        {{"cpu", "r1:cpu"}, {1, 1}, {}, {}, 0},
    };
    const StepTime t = predict(cases.at(row), micro);
    QVERIFY2(std::abs(t.seconds - expected) < 1e-9, qPrintable(QString("%1 s, expected %2 s").arg(t.seconds).arg(expected)));
    QCOMPARE(t.pipelinedRanks, ranks);
    // Every stage's time is spent once, on its own device, however it is cut into micro-batches.
    double busy = 0;
    for (const auto& [device, s] : t.busySeconds) busy += s;
    double total = 0;
    for (double s : cases.at(row).seconds) total += s;
    QVERIFY(std::abs(busy - total) < 1e-9);
  }

  // A plan of another network is refused, not replayed along the wrong edges.
  void otherNetworkRefused() {
    MemoryPlan plan;
    plan.stages.push_back(StagePlan{});
    plan.stages.back().name = "enc0";
    NetworkStructure net;
    QVERIFY_THROWS_EXCEPTION(std::exception, predictStepTime(plan, {}, net));
  }
};

QTEST_GUILESS_MAIN(StepTimeTest)
#include "StepTimeTest.moc"
