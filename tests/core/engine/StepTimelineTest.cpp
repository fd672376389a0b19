// The device timeline: every stage's forward and backward on the lane of its device, backward in
// reverse network order without overlap on a lane (a skip tensor read by two stages must not
// stretch the first reader's span), recompute inside its stage's backward, sharded stages on each
// shard's lane; the same over two ranks (splitseg-cli launch) with one span per micro-batch.
// Devices other than the CPU are stand-ins here (SPLITSEG_STAND_INS): the lanes are named after
// the placement, the work runs on the CPU.
#include "core/data/SampleSource.h"
#include "core/engine/StepTimeline.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <set>

using namespace splitseg;
using engine::SpanKind;

namespace {

std::vector<engine::TimelineSpan> ofKind(const std::vector<engine::TimelineSpan>& spans, SpanKind kind,
                                         const std::string& stage = "") {
  std::vector<engine::TimelineSpan> out;
  for (const auto& s : spans)
    if (s.kind == kind && (stage.empty() || s.stage == stage)) out.push_back(s);
  return out;
}

engine::StepMetrics trainOneStep(const QString& placementText, const QString& recompute, bool timeline) {
  torch::manual_seed(5);
  auto net = model::UNet3d(model::UNet3dOptions().base_channels(4).depth(4).dropout({0.0, 0.0, 0.0})).ptr();
  run::RunSpec run;
  run.steps = 2;
  run.patch = {32, 32, 32};
  run.batch = 2;
  run.seed = 7;
  run.timeline = timeline;
  run.setPlacement(placement::Placement::parse(placementText.toStdString(), net->stageNames(), "cpu"));
  run.recompute = run::parseStageList(recompute.toStdString(), net->stageNames());
  engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(), run);
  trainer.step();  // the first step allocates; the second is the one looked at
  return trainer.step();
}

std::set<std::string> split(const QString& list) {
  std::set<std::string> out;
  for (const auto& s : list.split(',', Qt::SkipEmptyParts)) out.insert(s.toStdString());
  return out;
}
} // namespace

class StepTimelineTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() {
    qputenv("SPLITSEG_STAND_INS", "cuda:0=cpu,cuda:1=cpu");
    torch::set_num_threads(1);
  }

  void busySeconds_data() {
    QTest::addColumn<QString>("spans");  // kind:start:end;...
    QTest::addColumn<double>("busy");
    QTest::newRow("disjoint") << "f:0:1;b:2:3" << 2.0;
    QTest::newRow("recompute nested in backward counts once") << "b:1:4;r:2:3" << 3.0;
    QTest::newRow("overlapping") << "f:0:2;b:1:3" << 3.0;
    QTest::newRow("waits and transfers are not work") << "w:0:5;t:5:6;o:6:7" << 1.0;
    QTest::newRow("empty") << "" << 0.0;
  }
  void busySeconds() {
    QFETCH(QString, spans);
    QFETCH(double, busy);
    const std::map<QString, SpanKind> kinds{{"f", SpanKind::Forward}, {"b", SpanKind::Backward},
                                            {"r", SpanKind::Recompute}, {"w", SpanKind::Wait},
                                            {"t", SpanKind::Transfer}, {"o", SpanKind::Optimizer}};
    std::vector<engine::TimelineSpan> list;
    for (const auto& item : spans.split(';', Qt::SkipEmptyParts)) {
      const auto p = item.split(':');
      list.push_back({"cpu", "x", kinds.at(p[0]), 0, p[1].toDouble(), p[2].toDouble()});
      list.push_back({"other", "x", SpanKind::Forward, 0, 0.0, 100.0});  // another lane never counts
    }
    QCOMPARE(engine::laneBusySeconds(list, "cpu"), busy);
  }

  void offByDefault() { QVERIFY(trainOneStep("enc0=cpu", "none", false).timeline.empty()); }

  void oneProcess_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<QString>("recompute");
    QTest::addColumn<QString>("lanes");
    QTest::newRow("one device") << "" << "none" << "cpu";
    QTest::newRow("decoders on a second device")
        << "enc0=cpu,enc1=cpu,enc2=cpu,bottleneck=cuda:0,dec2=cuda:0,dec1=cuda:0,dec0=cuda:0,head=cuda:0" << "none"
        << "cpu,cuda:0";
    QTest::newRow("recompute dec0 and enc1") << "enc0=cpu,enc1=cuda:0,enc2=cuda:0,bottleneck=cuda:0,dec2=cuda:0,dec1=cuda:0,dec0=cpu,head=cpu"
                                             << "dec0,enc1" << "cpu,cuda:0";
    QTest::newRow("dec0 sharded over two devices")
        << "enc0=cpu,enc1=cpu,enc2=cpu,bottleneck=cpu,dec2=cpu,dec1=cpu,dec0=cuda:0+cuda:1,head=cpu" << "none"
        << "cpu,cuda:0,cuda:1";
  }
  void oneProcess() {
    QFETCH(QString, placement);
    QFETCH(QString, recompute);
    QFETCH(QString, lanes);
    const auto m = trainOneStep(placement, recompute, true);
    const auto& spans = m.timeline;
    QVERIFY(!spans.empty());
    const auto got = engine::timelineLanes(spans);
    QCOMPARE(std::set<std::string>(got.begin(), got.end()), split(lanes));
    for (const auto& s : spans) {
      QVERIFY2(s.start >= 0 && s.start <= s.end && s.end <= m.seconds + 1e-3,
               (s.lane + " " + s.stage + " " + engine::toString(s.kind)).c_str());
    }
    auto net = model::UNet3d(model::UNet3dOptions().base_channels(4).depth(4)).ptr();
    const auto stages = net->stageNames();
    const auto p = placement::Placement::parse(placement.toStdString(), stages, "cpu");
    // Forward: one span per stage and shard lane, in network order.
    double previousStart = -1;
    for (const auto& stage : stages) {
      const auto f = ofKind(spans, SpanKind::Forward, stage);
      QCOMPARE(f.size(), p.shardsOf(stage).size());
      for (const auto& s : f)
        QVERIFY(std::find(p.shardsOf(stage).begin(), p.shardsOf(stage).end(), s.lane) != p.shardsOf(stage).end());
      QVERIFY2(f.front().start >= previousStart, stage.c_str());
      previousStart = f.front().start;
    }
    // Backward: every stage, after the loss, the head first and enc0 last, no overlap on a lane.
    const double lossEnd = ofKind(spans, SpanKind::Forward, "loss").front().end;
    std::map<std::string, std::vector<engine::TimelineSpan>> byLane;
    for (const auto& stage : stages) {
      const auto b = ofKind(spans, SpanKind::Backward, stage);
      QCOMPARE(b.size(), p.shardsOf(stage).size());
      QVERIFY2(b.front().start >= lossEnd, stage.c_str());
      for (const auto& s : b) byLane[s.lane].push_back(s);
    }
    QVERIFY(ofKind(spans, SpanKind::Backward, "head").front().start <= ofKind(spans, SpanKind::Backward, "dec0").front().start);
    QVERIFY(ofKind(spans, SpanKind::Backward, "dec0").front().end <= ofKind(spans, SpanKind::Backward, "enc0").front().start + 1e-6);
    for (auto& [lane, list] : byLane) {
      std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
      for (std::size_t k = 1; k < list.size(); ++k)
        QVERIFY2(list[k - 1].end <= list[k].start + 1e-6,
                 (lane + ": " + list[k - 1].stage + "'s backward overlaps " + list[k].stage + "'s").c_str());
    }
    // Recompute: exactly the checkpointed stages, inside their backward.
    const auto checkpointed = split(recompute == "none" ? QString() : recompute);
    std::set<std::string> recomputed;
    for (const auto& r : ofKind(spans, SpanKind::Recompute)) {
      recomputed.insert(r.stage);
      const auto b = ofKind(spans, SpanKind::Backward, r.stage).front();
      QVERIFY2(r.start >= b.start && r.end <= b.end + 1e-6, r.stage.c_str());
    }
    QCOMPARE(recomputed, checkpointed);
    // The optimizer on every lane, last; each lane did some work, never more than the step.
    for (const auto& lane : got) {
      const double busy = engine::laneBusySeconds(spans, lane);
      QVERIFY2(busy > 0 && busy <= m.seconds + 1e-3, lane.c_str());
    }
    QCOMPARE(ofKind(spans, SpanKind::Optimizer).size(), got.size());
  }

  void twoRanksWithMicroBatches() {
    QProcess p;
    p.start(SPLITSEG_CLI, {"launch", "--local-ranks", "2", "train", "--synthetic", "16", "--patch", "16", "--base", "4",
                           "--depth", "3", "--batch", "4", "--micro-batches", "2", "--steps", "2", "--seed", "3",
                           "--recompute", "dec0", "--timeline", "--progress", "jsonl", "--placement",
                           "enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu"});
    QVERIFY(p.waitForFinished(120000));
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitCode() == 0, qPrintable(err));
    QJsonArray spans;
    for (const auto& line : QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
      const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
      if (o.value("step").toInt() == 2) spans = o.value("timeline").toArray();
    }
    QVERIFY2(!spans.isEmpty(), qPrintable(err));
    std::map<std::string, std::string> laneOf{{"enc0", "r0:cpu"}, {"enc1", "r0:cpu"}, {"bottleneck", "r1:cpu"},
                                              {"dec1", "r1:cpu"}, {"dec0", "r1:cpu"}, {"head", "r1:cpu"}};
    std::map<std::string, int> count;  // kind/stage/micro -> spans
    std::set<std::string> lanes;
    bool r1Waited = false;
    for (const auto& v : spans) {
      const auto s = v.toObject();
      const std::string kind = s.value("kind").toString().toStdString(), stage = s.value("stage").toString().toStdString();
      const std::string lane = s.value("lane").toString().toStdString();
      lanes.insert(lane);
      QVERIFY(s.value("start").toDouble() <= s.value("end").toDouble());
      if (laneOf.count(stage) && kind != "wait") QCOMPARE(lane, laneOf.at(stage));
      ++count[kind + "/" + stage + "/" + std::to_string(s.value("micro").toInt())];
      if (lane == "r1:cpu" && kind == "wait") r1Waited = true;
    }
    QCOMPARE(lanes, (std::set<std::string>{"r0:cpu", "r1:cpu"}));
    for (const auto& [stage, lane] : laneOf)
      for (int m = 0; m < 2; ++m) {
        QCOMPARE(count["forward/" + stage + "/" + std::to_string(m)], 1);
        QCOMPARE(count["backward/" + stage + "/" + std::to_string(m)], 1);
      }
    QCOMPARE(count["recompute/dec0/0"], 1);
    QCOMPARE(count["recompute/dec0/1"], 1);
    QCOMPARE(count["recompute/enc0/0"], 0);
    QVERIFY2(r1Waited, "rank 1 receives its activations: it must show waits");
    QCOMPARE(count["optimizer//0"], 2);
  }
};

QTEST_GUILESS_MAIN(StepTimelineTest)
#include "StepTimelineTest.moc"
