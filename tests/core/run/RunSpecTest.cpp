// The run description: one value, its JSON round trip byte for byte, strict parsing (wrong
// types, unknown keys and newer versions refused by name), validation that returns every
// problem with its field, and the planner's request taken from it.
#include "core/base/Error.h"
#include "core/run/RunSpec.h"

#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

using namespace splitseg;

namespace {

// The stages of a depth-3 U-Net, in network order (validate and planRequest only need names).
const std::vector<std::string> kStages{"enc0", "enc1", "bottleneck", "dec1", "dec0", "head"};

nlohmann::json asJson(const run::RunSpec& r) { return nlohmann::json::parse(r.toJson().dump()); }

// Every field away from its default.
run::RunSpec fullRun() {
  run::RunSpec r;
  r.architecture = "resunet3d";
  r.networkOptions = {{"base_channels", 8}, {"depth", 3}, {"norm", "instance"}, {"dropout", {0.25, 0.125}}};
  r.placement = {{"enc0", "cuda:1"}, {"head", "cpu"}, {"dec0", "cuda:0+cuda:1"}};
  r.shardAxis = placement::ShardAxis::Height;
  r.shardSlabs = {{"cuda:0+cuda:1", {32, 64}}};
  r.precision = placement::StagePrecisions::parse("bf16:enc0,dec0");
  r.recompute = {"enc1", "dec1"};
  r.offload = true;
  r.cpuLayout = planner::CpuLayout::ChannelsLast;
  r.patch = {96, 80, 64};
  r.batch = 3;
  r.microBatches = 2;
  r.rankTimeoutSeconds = 30;
  r.steps = 1234;
  r.epochs = 4;
  r.stepsPerEpoch = 25;
  r.validateEvery = 10;
  r.checkpointEvery = 20;
  r.learningRate = 3.7e-4;
  r.lrSchedule = run::LrSchedule::Poly;
  r.seed = 18446744073709551615ull;  // the largest seed survives (unsigned in JSON)
  r.cpuBudgetBytes = std::int64_t{3} << 30;
  r.preprocessing.canonical = false;
  r.preprocessing.targetSpacing = {0.8, 0.8, 2.5};
  r.preprocessing.intensity = intensityPreset("mr-zscore");
  r.preprocessing.intensity.nonzeroOnly = true;
  r.data.kind = run::DataKind::Pairs;
  r.data.image = "/data/ct.nii.gz";
  r.data.label = "/data/ct_label.nii.gz";
  r.data.dataset = "/data/Task09";
  r.data.validationFraction = 0.3;
  r.checkpoint = "/models/run.ckpt";
  r.window = {128, 128, 96};
  r.overlap = 0.25;
  r.mirror = {true, false, true};
  r.keepLargest = true;
  return r;
}

} // namespace

class RunSpecTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void jsonRoundTrip_data() {
    QTest::addColumn<bool>("full");
    QTest::newRow("defaults") << false;
    QTest::newRow("every field set") << true;
  }
  void jsonRoundTrip() {
    QFETCH(bool, full);
    const run::RunSpec r = full ? fullRun() : run::RunSpec{};
    QVERIFY(r.validate().empty());
    const std::string text = r.toJson().dump();
    const run::RunSpec back = run::RunSpec::fromJson(nlohmann::json::parse(text));
    QCOMPARE(back.toJson().dump(), text);  // byte for byte
    QCOMPARE(run::RunSpec::fromText(r.toJson().dump(2)).toJson().dump(2), r.toJson().dump(2));
    QVERIFY(back == r);
    // The fields themselves, not only the text.
    QCOMPARE(back.architecture, r.architecture);
    QCOMPARE(back.networkOptions, r.networkOptions);
    QCOMPARE(back.placement, r.placement);
    QCOMPARE(back.precision.toString(kStages), r.precision.toString(kStages));
    QCOMPARE(back.recompute, r.recompute);
    QCOMPARE(back.offload, r.offload);
    QVERIFY(back.cpuLayout == r.cpuLayout);
    QCOMPARE(back.patch, r.patch);
    QCOMPARE(back.batch, r.batch);
    QCOMPARE(back.microBatches, r.microBatches);
    QCOMPARE(back.rankTimeoutSeconds, r.rankTimeoutSeconds);
    QCOMPARE(back.totalSteps(), r.totalSteps());
    QCOMPARE(back.validateEvery, r.validateEvery);
    QCOMPARE(back.checkpointEvery, r.checkpointEvery);
    QCOMPARE(back.learningRate, r.learningRate);
    QVERIFY(back.lrSchedule == r.lrSchedule);
    QCOMPARE(back.seed, r.seed);
    QCOMPARE(back.cpuBudgetBytes, r.cpuBudgetBytes);
    QCOMPARE(back.preprocessing.toJson(), r.preprocessing.toJson());
    QVERIFY(back.data == r.data);
    QCOMPARE(back.checkpoint, r.checkpoint);
    QCOMPARE(back.window, r.window);
    QCOMPARE(back.overlap, r.overlap);
    QCOMPARE(back.mirror, r.mirror);
    QCOMPARE(back.keepLargest, r.keepLargest);
    // A changed field changes the text.
    run::RunSpec other = back;
    other.stepsPerEpoch += 1;
    QVERIFY(other != r);
  }

  // The rate each step takes: the run's rate throughout, or decayed to 0 at the run's end (the
  // formulas written out here; t = steps done, T = the run's total).
  void learningRateOverTheRun_data() {
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("epochs");  // 0: 100 steps; else epochs of 25 steps
    QTest::addColumn<int>("done");
    QTest::addColumn<double>("expected");
    const double lr = 2e-3;
    QTest::newRow("constant, first") << "constant" << 0 << 0 << lr;
    QTest::newRow("constant, last") << "constant" << 0 << 99 << lr;
    QTest::newRow("poly, first") << "poly" << 0 << 0 << lr;
    QTest::newRow("poly, half") << "poly" << 0 << 50 << lr * std::pow(0.5, 0.9);
    QTest::newRow("poly, last") << "poly" << 0 << 99 << lr * std::pow(0.01, 0.9);
    QTest::newRow("poly, past the end") << "poly" << 0 << 150 << 0.0;
    QTest::newRow("poly over epochs, 3 of 8") << "poly" << 8 << 75 << lr * std::pow(1 - 75.0 / 200, 0.9);
    QTest::newRow("cosine, first") << "cosine" << 0 << 0 << lr;
    QTest::newRow("cosine, half") << "cosine" << 0 << 50 << lr / 2;
    QTest::newRow("cosine, quarter") << "cosine" << 0 << 25 << lr * (1 + std::sqrt(0.5)) / 2;
  }
  void learningRateOverTheRun() {
    QFETCH(QString, schedule);
    QFETCH(int, epochs);
    QFETCH(int, done);
    QFETCH(double, expected);
    run::RunSpec r;
    r.learningRate = 2e-3;
    r.steps = 100;
    r.epochs = epochs;
    r.stepsPerEpoch = 25;
    r.lrSchedule = run::lrScheduleFromString(schedule.toStdString());
    QCOMPARE(run::toString(r.lrSchedule), schedule.toStdString());
    QVERIFY2(std::abs(r.learningRateAt(done) - expected) <= 1e-15, qPrintable(QString::number(r.learningRateAt(done), 'g', 17)));
  }

  void keysHaveAFixedOrder() {
    const auto j = fullRun().toJson();
    QStringList keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys << QString::fromStdString(it.key());
    QCOMPARE(keys.first(), QString("splitseg_run"));
    QCOMPARE(j["splitseg_run"].get<int>(), run::kRunSpecVersion);
    // Two runs built field by field in different orders give the same text.
    run::RunSpec a = fullRun(), b;
    b.keepLargest = a.keepLargest;
    b.mirror = a.mirror;
    b.overlap = a.overlap;
    b.window = a.window;
    b.checkpoint = a.checkpoint;
    b.data = a.data;
    b.preprocessing = a.preprocessing;
    b.cpuBudgetBytes = a.cpuBudgetBytes;
    b.seed = a.seed;
    b.lrSchedule = a.lrSchedule;
    b.learningRate = a.learningRate;
    b.checkpointEvery = a.checkpointEvery;
    b.validateEvery = a.validateEvery;
    b.stepsPerEpoch = a.stepsPerEpoch;
    b.epochs = a.epochs;
    b.steps = a.steps;
    b.rankTimeoutSeconds = a.rankTimeoutSeconds;
    b.microBatches = a.microBatches;
    b.batch = a.batch;
    b.patch = a.patch;
    b.cpuLayout = a.cpuLayout;
    b.offload = a.offload;
    b.recompute = {"dec1", "enc1"};
    b.precision = a.precision;
    b.shardSlabs["cuda:0+cuda:1"] = {32, 64};
    b.shardAxis = placement::ShardAxis::Height;
    b.placement["dec0"] = "cuda:0+cuda:1";
    b.placement["head"] = "cpu";
    b.placement["enc0"] = "cuda:1";
    b.networkOptions = nlohmann::json::parse(R"({"dropout":[0.25,0.125],"norm":"instance","depth":3,"base_channels":8})");
    b.architecture = a.architecture;
    QCOMPARE(b.toJson().dump(), a.toJson().dump());
  }

  void strictParsing_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("field");  // the error must name it
    QTest::newRow("learning rate as text") << R"({"splitseg_run":1,"learning_rate":"fast"})" << "learning_rate";
    QTest::newRow("batch fractional") << R"({"splitseg_run":1,"batch":2.5})" << "batch";
    QTest::newRow("batch as text") << R"({"splitseg_run":1,"batch":"2"})" << "batch";
    QTest::newRow("steps as text") << R"({"splitseg_run":1,"schedule":{"steps":"many"}})" << "schedule.steps";
    QTest::newRow("schedule not an object") << R"({"splitseg_run":1,"schedule":[1]})" << "schedule";
    QTest::newRow("patch element") << R"({"splitseg_run":1,"patch":[64,"a",64]})" << "patch[1]";
    QTest::newRow("patch two numbers") << R"({"splitseg_run":1,"patch":[64,64]})" << "patch";
    QTest::newRow("negative seed") << R"({"splitseg_run":1,"seed":-1})" << "seed";
    QTest::newRow("options not an object") << R"({"splitseg_run":1,"network":{"options":[1,2]}})"
                                           << "network.options";
    QTest::newRow("architecture a number") << R"({"splitseg_run":1,"network":{"architecture":3}})"
                                           << "network.architecture";
    QTest::newRow("recompute not a list") << R"({"splitseg_run":1,"recompute":"enc0"})" << "recompute";
    QTest::newRow("recompute element") << R"({"splitseg_run":1,"recompute":["enc0",7]})" << "recompute[1]";
    QTest::newRow("overlap as text") << R"({"splitseg_run":1,"inference":{"overlap":"half"}})" << "inference.overlap";
    QTest::newRow("unknown top-level key") << R"({"splitseg_run":1,"stepz":5})" << "stepz";
    QTest::newRow("unknown schedule key") << R"({"splitseg_run":1,"schedule":{"steps":5,"stepz":5}})"
                                          << "schedule.stepz";
    QTest::newRow("unknown network key") << R"({"splitseg_run":1,"network":{"architecture":"unet3d","optionz":{}}})"
                                         << "network.optionz";
    QTest::newRow("unknown data key") << R"({"splitseg_run":1,"data":{"imgae":"a.nii"}})" << "data.imgae";
    QTest::newRow("unknown inference key") << R"({"splitseg_run":1,"inference":{"windoe":[1,1,1]}})"
                                           << "inference.windoe";
    QTest::newRow("unknown preprocessing key") << R"({"splitseg_run":1,"preprocessing":{"spacing":[1,1,1]}})"
                                               << "preprocessing.spacing";
    QTest::newRow("unknown intensity key") << R"({"splitseg_run":1,"preprocessing":{"intensity":{"window":400}}})"
                                           << "preprocessing.intensity.window";
    QTest::newRow("newer version") << R"({"splitseg_run":99})" << "splitseg_run";
    QTest::newRow("no version") << R"({"batch":2})" << "splitseg_run";
    QTest::newRow("version as text") << R"({"splitseg_run":"1"})" << "splitseg_run";
    QTest::newRow("not an object") << R"([1,2,3])" << "expected a JSON object";
    QTest::newRow("bad device string") << R"({"splitseg_run":1,"placement":{"enc0":"tpu:0"}})" << "placement.enc0";
    QTest::newRow("device not text") << R"({"splitseg_run":1,"placement":{"enc0":0}})" << "placement.enc0";
    QTest::newRow("shard axis unknown") << R"({"splitseg_run":1,"shard":{"axis":"time"}})" << "shard.axis";
    QTest::newRow("shard unknown key") << R"({"splitseg_run":1,"shard":{"axes":"depth"}})" << "shard.axes";
    QTest::newRow("lr schedule unknown") << R"({"splitseg_run":1,"lr_schedule":"step"})" << "lr_schedule";
    QTest::newRow("lr schedule not text") << R"({"splitseg_run":1,"lr_schedule":0.9})" << "lr_schedule";
    QTest::newRow("mirror axis unknown") << R"({"splitseg_run":1,"inference":{"mirror":"xw"}})" << "inference.mirror";
    QTest::newRow("mirror axis twice") << R"({"splitseg_run":1,"inference":{"mirror":"xx"}})" << "inference.mirror";
    QTest::newRow("mirror not text") << R"({"splitseg_run":1,"inference":{"mirror":true}})" << "inference.mirror";
    QTest::newRow("keep largest not a flag") << R"({"splitseg_run":1,"inference":{"keep_largest":"yes"}})"
                                                  << "inference.keep_largest";
    QTest::newRow("cpu layout unknown") << R"({"splitseg_run":1,"cpu_layout":"nhwc"})" << "cpu_layout";
    QTest::newRow("cpu layout not text") << R"({"splitseg_run":1,"cpu_layout":true})" << "cpu_layout";
    QTest::newRow("shard slabs not sizes") << R"({"splitseg_run":1,"shard":{"slabs":{"cpu+cuda:0":[8,"a"]}}})"
                                           << "shard.slabs.cpu+cuda:0";
    QTest::newRow("shard slabs one slab") << R"({"splitseg_run":1,"shard":{"slabs":{"cpu+cuda:0":[8]}}})"
                                          << "shard.slabs.cpu+cuda:0";
    QTest::newRow("shard slabs device twice") << R"({"splitseg_run":1,"shard":{"slabs":{"cuda:0+cuda:0":[8,8]}}})"
                                              << "listed twice";
    QTest::newRow("sharded placement device twice") << R"({"splitseg_run":1,"placement":{"enc0":"cuda:1+cuda:1"}})"
                                                    << "placement.enc0";
    QTest::newRow("unknown precision") << R"({"splitseg_run":1,"precision":"fp16"})" << "precision";
    QTest::newRow("unknown data source") << R"({"splitseg_run":1,"data":{"source":"tape"}})" << "data.source";
    QTest::newRow("bad preprocessing mode") << R"({"splitseg_run":1,"preprocessing":{"intensity":{"mode":"hu"}}})"
                                            << "preprocessing";
  }
  void strictParsing() {
    QFETCH(QString, json);
    QFETCH(QString, field);
    try {
      run::RunSpec::fromText(json.toStdString());
      QFAIL("accepted");
    } catch (const InvalidArgument& e) {
      const QString what = e.what();
      QVERIFY2(what.contains(field), e.what());
      QVERIFY2(!what.contains('\n'), e.what());  // one line
    }
  }

  void notJsonIsRefused() {
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, run::RunSpec::fromText("{ not json"));
  }

  void missingKeysKeepDefaults() {
    const auto r = run::RunSpec::fromText(R"({"splitseg_run":1,"schedule":{"steps":7}})");
    run::RunSpec expected;
    expected.steps = 7;
    QCOMPARE(r.toJson().dump(), expected.toJson().dump());
    // "cuda" is written as the device it means.
    QCOMPARE(run::RunSpec::fromText(R"({"splitseg_run":1,"placement":{"enc0":"cuda"}})").placement.at("enc0"),
             std::string("cuda:0"));
  }

  void validate_data() {
    QTest::addColumn<QString>("change");   // a key of the table in validate()
    QTest::addColumn<QStringList>("devices");
    QTest::addColumn<bool>("withStages");
    QTest::addColumn<QString>("field");    // "" : valid
    const QStringList none;
    const QStringList cpu{"cpu"};
    QTest::newRow("defaults") << "none" << cpu << true << "";
    QTest::newRow("patch 0") << "patch 0" << none << false << "patch";
    QTest::newRow("patch too large") << "patch 5000" << none << false << "patch";
    QTest::newRow("batch 0") << "batch 0" << none << false << "batch";
    QTest::newRow("more micro-batches than samples") << "micro 5 of 4" << none << false << "micro_batches";
    QTest::newRow("micro-batches 0") << "micro 0" << none << false << "micro_batches";
    QTest::newRow("rank timeout 0") << "rank timeout 0" << none << false << "rank_timeout";
    QTest::newRow("steps 0") << "steps 0" << none << false << "schedule.steps";
    QTest::newRow("epochs negative") << "epochs -1" << none << false << "schedule.epochs";
    QTest::newRow("steps per epoch 0") << "steps per epoch 0" << none << false << "schedule.steps_per_epoch";
    QTest::newRow("validate every negative") << "validate every -1" << none << false << "schedule.validate_every";
    QTest::newRow("checkpoint every negative") << "checkpoint every -1" << none << false << "schedule.checkpoint_every";
    QTest::newRow("learning rate 0") << "lr 0" << none << false << "learning_rate";
    QTest::newRow("learning rate negative") << "lr -0.001" << none << false << "learning_rate";
    QTest::newRow("learning rate NaN") << "lr nan" << none << false << "learning_rate";
    QTest::newRow("learning rate absurd") << "lr 1000" << none << false << "learning_rate";
    QTest::newRow("cpu budget negative") << "cpu budget -1" << none << false << "cpu_budget";
    QTest::newRow("overlap 1.0") << "overlap 1" << none << false << "inference.overlap";
    QTest::newRow("overlap negative") << "overlap -0.1" << none << false << "inference.overlap";
    QTest::newRow("window negative") << "window -1" << none << false << "inference.window";
    QTest::newRow("validation fraction 1") << "validation fraction 1" << none << false << "data.validation_fraction";
    QTest::newRow("no architecture") << "architecture empty" << none << false << "network.architecture";
    QTest::newRow("options not an object") << "options array" << none << false << "network.options";
    QTest::newRow("device nobody has") << "enc0 on cuda:7" << cpu << false << "placement.enc0";
    QTest::newRow("device nobody has, not checked") << "enc0 on cuda:7" << none << false << "";
    QTest::newRow("bad device string") << "enc0 on tpu" << none << false << "placement.enc0";
    QTest::newRow("unknown stage in placement") << "enc9 on cpu" << cpu << true << "placement.enc9";
    QTest::newRow("unknown stage in recompute") << "recompute enc9" << none << true << "recompute";
    QTest::newRow("unknown stage in recompute, not checked") << "recompute enc9" << none << false << "";
    QTest::newRow("unknown stage in precision") << "precision bf16:enc9" << none << true << "precision";
    QTest::newRow("unknown stage in precision, not checked") << "precision bf16:enc9" << none << false << "";
    QTest::newRow("pairs without label") << "pairs without label" << none << false << "data.label";
    QTest::newRow("pairs without image") << "pairs without image" << none << false << "data.image";
    QTest::newRow("volume without image") << "volume without image" << none << false << "data.image";
    QTest::newRow("dataset without folder") << "dataset without folder" << none << false << "data.dataset";
    QTest::newRow("pairs complete") << "pairs complete" << none << false << "";
    QTest::newRow("host offload on a rank") << "offload on a rank" << none << false << "offload";
    QTest::newRow("host offload in one process") << "offload here" << none << false << "";
    QTest::newRow("channels-last on a rank") << "channels-last on a rank" << none << false << "cpu_layout";
    QTest::newRow("auto layout on a rank") << "auto layout on a rank" << none << false << "";
  }
  void validate() {
    QFETCH(QString, change);
    QFETCH(QStringList, devices);
    QFETCH(bool, withStages);
    QFETCH(QString, field);
    static const std::map<QString, std::function<void(run::RunSpec&)>> changes{
        {"none", [](run::RunSpec&) {}},
        {"patch 0", [](run::RunSpec& r) { r.patch = {0, 64, 64}; }},
        {"patch 5000", [](run::RunSpec& r) { r.patch = {64, 64, 5000}; }},
        {"batch 0", [](run::RunSpec& r) { r.batch = 0; }},
        {"micro 5 of 4", [](run::RunSpec& r) { r.batch = 4; r.microBatches = 5; }},
        {"micro 0", [](run::RunSpec& r) { r.microBatches = 0; }},
        {"rank timeout 0", [](run::RunSpec& r) { r.rankTimeoutSeconds = 0; }},
        {"steps 0", [](run::RunSpec& r) { r.steps = 0; }},
        {"epochs -1", [](run::RunSpec& r) { r.epochs = -1; }},
        {"steps per epoch 0", [](run::RunSpec& r) { r.epochs = 2; r.stepsPerEpoch = 0; }},
        {"validate every -1", [](run::RunSpec& r) { r.validateEvery = -1; }},
        {"checkpoint every -1", [](run::RunSpec& r) { r.checkpointEvery = -1; }},
        {"lr 0", [](run::RunSpec& r) { r.learningRate = 0; }},
        {"lr -0.001", [](run::RunSpec& r) { r.learningRate = -0.001; }},
        {"lr nan", [](run::RunSpec& r) { r.learningRate = std::numeric_limits<double>::quiet_NaN(); }},
        {"lr 1000", [](run::RunSpec& r) { r.learningRate = 1000; }},
        {"cpu budget -1", [](run::RunSpec& r) { r.cpuBudgetBytes = -1; }},
        {"overlap 1", [](run::RunSpec& r) { r.overlap = 1.0; }},
        {"overlap -0.1", [](run::RunSpec& r) { r.overlap = -0.1; }},
        {"window -1", [](run::RunSpec& r) { r.window = {64, -1, 64}; }},
        {"validation fraction 1", [](run::RunSpec& r) { r.data.validationFraction = 1.0; }},
        {"architecture empty", [](run::RunSpec& r) { r.architecture.clear(); }},
        {"options array", [](run::RunSpec& r) { r.networkOptions = nlohmann::json::array(); }},
        {"enc0 on cuda:7", [](run::RunSpec& r) { r.placement["enc0"] = "cuda:7"; }},
        {"enc0 on tpu", [](run::RunSpec& r) { r.placement["enc0"] = "tpu"; }},
        {"enc9 on cpu", [](run::RunSpec& r) { r.placement["enc9"] = "cpu"; }},
        {"recompute enc9", [](run::RunSpec& r) { r.recompute = {"enc0", "enc9"}; }},
        {"precision bf16:enc9", [](run::RunSpec& r) { r.precision.stages["enc9"] = placement::Precision::BF16; }},
        {"pairs without label", [](run::RunSpec& r) { r.data.kind = run::DataKind::Pairs; r.data.image = "a.nii"; }},
        {"pairs without image", [](run::RunSpec& r) { r.data.kind = run::DataKind::Pairs; r.data.label = "l.nii"; }},
        {"volume without image", [](run::RunSpec& r) { r.data.kind = run::DataKind::Volume; }},
        {"dataset without folder", [](run::RunSpec& r) { r.data.kind = run::DataKind::Dataset; }},
        {"offload on a rank", [](run::RunSpec& r) { r.offload = true; r.placement["dec0"] = "r1:cuda:0"; }},
        {"offload here", [](run::RunSpec& r) { r.offload = true; r.placement["dec0"] = "cuda:0+cuda:1"; }},
        {"channels-last on a rank",
         [](run::RunSpec& r) { r.cpuLayout = planner::CpuLayout::ChannelsLast; r.placement["dec0"] = "r1:cpu"; }},
        {"auto layout on a rank", [](run::RunSpec& r) { r.placement["dec0"] = "r1:cpu"; }},
        {"pairs complete",
         [](run::RunSpec& r) {
           r.data.kind = run::DataKind::Pairs;
           r.data.image = "a.nii";
           r.data.label = "l.nii";
         }},
    };
    run::RunSpec r;
    QVERIFY2(changes.count(change), qPrintable(change));
    changes.at(change)(r);
    std::vector<std::string> devs;
    for (const auto& d : devices) devs.push_back(d.toStdString());
    const auto stages = withStages ? kStages : std::vector<std::string>{};
    const auto problems = r.validate(devs, stages);
    if (field.isEmpty()) {
      QVERIFY2(problems.empty(), problems.empty() ? "" : problems.front().text().c_str());
      r.check(devs, stages);
      return;
    }
    QCOMPARE(problems.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(problems.front().field), field);
    QVERIFY(!problems.front().message.empty());
    try {
      r.check(devs, stages);
      QFAIL("check() accepted a bad run");
    } catch (const InvalidArgument& e) {
      const QString what = e.what();
      QVERIFY2(what.startsWith("run." + field + ":"), e.what());
      QVERIFY2(!what.contains('\n'), e.what());
    }
  }

  void validateReturnsEveryProblem() {
    run::RunSpec r;
    r.patch = {0, 64, 64};
    r.batch = 0;
    r.learningRate = -1;
    r.overlap = 1.0;
    r.placement["enc0"] = "cuda:7";
    r.recompute = {"enc9"};
    QStringList fields;
    for (const auto& p : r.validate({"cpu"}, kStages)) fields << QString::fromStdString(p.field);
    fields.sort();
    QCOMPARE(fields, (QStringList{"batch", "inference.overlap", "learning_rate", "patch", "placement.enc0", "recompute"}));
  }

  void planRequest_data() {
    QTest::addColumn<QString>("precision");
    QTest::addColumn<QString>("recompute");
    QTest::addColumn<int>("batch");
    QTest::newRow("fp32, none") << "fp32" << "" << 1;
    QTest::newRow("bf16, all") << "bf16" << "all" << 2;
    QTest::newRow("mixed, some") << "bf16:enc0,dec0" << "enc1,dec1" << 4;
  }
  void planRequest() {
    QFETCH(QString, precision);
    QFETCH(QString, recompute);
    QFETCH(int, batch);
    run::RunSpec r;
    r.patch = {96, 80, 64};  // x, y, z
    r.batch = batch;
    r.precision = placement::StagePrecisions::parse(precision.toStdString(), kStages);
    r.recompute = run::parseStageList(recompute.toStdString(), kStages);
    r.placement = {{"enc1", "cuda:1"}, {"dec1", "cpu"}};
    const std::vector<planner::DeviceSpec> devices{{"cuda:0", std::int64_t{16} << 30}, {"cuda:1", std::int64_t{16} << 30},
                                                     {"cpu", std::int64_t{64} << 30}};
    const auto req = r.planRequest(kStages, devices);
    QVERIFY((req.size == std::array<std::int64_t, 3>{64, 80, 96}));  // D, H, W
    QCOMPARE(req.batch, batch);
    QCOMPARE(req.precision.toString(kStages), r.precision.toString(kStages));
    for (const auto& s : kStages) QVERIFY(req.precision.of(s) == r.precision.of(s));
    QCOMPARE(req.checkpoint, r.recompute);
    // The CPU layout arrives resolved for this host; explicit layouts whatever the host.
    QCOMPARE(req.cpuChannelsLast, planner::usesChannelsLast(planner::CpuLayout::Auto));
    r.cpuLayout = planner::CpuLayout::Ncdhw;
    QVERIFY(!r.planRequest(kStages, devices).cpuChannelsLast);
    r.cpuLayout = planner::CpuLayout::ChannelsLast;
    QVERIFY(r.planRequest(kStages, devices).cpuChannelsLast);
    QCOMPARE(req.devices.size(), devices.size());
    QCOMPARE(req.placement.stages(), kStages);
    // Listed stages where the run says; the others on the first device.
    for (const auto& s : kStages) {
      const std::string expected = s == "enc1" ? "cuda:1" : s == "dec1" ? "cpu" : "cuda:0";
      QCOMPARE(req.placement.deviceOf(s), expected);
    }
  }

  // A CPU budget caps every CPU's capacity (this process's and a rank's) at the budget plus the
  // planner's allowance for it; GPUs keep theirs; a budget above the host changes nothing.
  void cpuBudgetIsTheCpusCapacity_data() {
    QTest::addColumn<qint64>("budgetMiB");
    QTest::addColumn<qint64>("expectedCpuMiB");  // 0: the host's 4096 unchanged
    QTest::newRow("none") << qint64(0) << qint64(0);
    QTest::newRow("1 GiB") << qint64(1024) << qint64(1024 + 86);
    QTest::newRow("above the host") << qint64(8192) << qint64(0);
  }
  void cpuBudgetIsTheCpusCapacity() {
    QFETCH(qint64, budgetMiB);
    QFETCH(qint64, expectedCpuMiB);
    run::RunSpec r;
    r.cpuBudgetBytes = budgetMiB << 20;
    planner::DeviceSpec own{"cpu", std::int64_t{4096} << 20}, rank{"r1:cpu", std::int64_t{4096} << 20},
        gpu{"cuda:0", std::int64_t{16} << 30}, measured{"r2:cpu", std::int64_t{4096} << 20};
    measured.allowance = std::int64_t{10} << 20;  // a measured allowance is the one added
    for (const auto& req : {r.planRequest(kStages, {own, rank, gpu, measured}),
                            r.inferencePlanRequest(kStages, {own, rank, gpu, measured}, {32, 32, 32}, 1)}) {
      const std::int64_t cpu = (expectedCpuMiB > 0 ? expectedCpuMiB : 4096) << 20;
      QCOMPARE(req.devices[0].capacity, cpu);
      QCOMPARE(req.devices[1].capacity, cpu);
      QCOMPARE(req.devices[2].capacity, std::int64_t{16} << 30);
      QCOMPARE(req.devices[3].capacity, expectedCpuMiB > 0 ? (budgetMiB + 10) << 20 : std::int64_t{4096} << 20);
    }
    QCOMPARE(planner::PlannerOptions{}.cpuAllowanceBytes, std::int64_t{86} << 20);  // the row's 86
  }

  // The inference request carries the run's window (as D, H, W), overlap and mirroring.
  void inferencePlanRequest_data() {
    QTest::addColumn<QString>("mirror");
    QTest::addColumn<bool>("planned");
    QTest::newRow("none") << "none" << false;
    QTest::newRow("z") << "z" << true;
    QTest::newRow("all") << "xyz" << true;
  }
  void inferencePlanRequest() {
    QFETCH(QString, mirror);
    QFETCH(bool, planned);
    run::RunSpec r;
    r.window = {64, 48, 32};
    r.overlap = 0.25;
    r.mirror = run::mirrorFromString(mirror.toStdString());
    const std::vector<planner::DeviceSpec> cpu{{"cpu", std::int64_t{1} << 30}};
    const auto req = r.inferencePlanRequest(kStages, cpu, {40, 50, 70}, 2);
    QVERIFY(req.inference);
    QVERIFY((req.size == std::array<std::int64_t, 3>{32, 48, 64}));
    QVERIFY((req.volume == std::array<std::int64_t, 3>{40, 50, 70}));
    QCOMPARE(req.overlap, 0.25);
    QCOMPARE(req.batch, 2);
    QCOMPARE(req.mirror, planned);
  }

  void mirrorAxesAsText_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("canonical");  // "!": refused
    QTest::newRow("all") << "xyz" << "xyz";
    QTest::newRow("any order") << "zyx" << "xyz";
    QTest::newRow("one") << "y" << "y";
    QTest::newRow("two") << "zx" << "xz";
    QTest::newRow("empty") << "" << "";
    QTest::newRow("none") << "none" << "";
    QTest::newRow("twice") << "xzx" << "!";
    QTest::newRow("upper case") << "X" << "!";
    QTest::newRow("comma") << "x,y" << "!";
  }
  void mirrorAxesAsText() {
    QFETCH(QString, text);
    QFETCH(QString, canonical);
    if (canonical == "!") {
      QVERIFY_THROWS_EXCEPTION(InvalidArgument, run::mirrorFromString(text.toStdString()));
      return;
    }
    const auto axes = run::mirrorFromString(text.toStdString());
    QCOMPARE(QString::fromStdString(run::mirrorToString(axes)), canonical);
    QCOMPARE(axes[1], canonical.contains('y'));
  }

  void planRequestRefusesWhatItCannotPlan() {
    run::RunSpec r;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, r.planRequest(kStages, {}));  // no devices
    const std::vector<planner::DeviceSpec> cpu{{"cpu", std::int64_t{1} << 30}};
    r.placement["enc9"] = "cpu";
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, r.planRequest(kStages, cpu));  // unknown stage
  }

  void placementResolvesAndStores() {
    run::RunSpec r;
    r.placement = {{"head", "cuda:0"}};
    const auto p = r.resolvePlacement(kStages, "cpu");
    QCOMPARE(p.stages(), kStages);
    QCOMPARE(p.deviceOf("head"), std::string("cuda:0"));
    QCOMPARE(p.deviceOf("enc0"), std::string("cpu"));
    run::RunSpec s;
    s.setPlacement(p);
    QCOMPARE(s.placement.size(), kStages.size());
    QCOMPARE(s.resolvePlacement(kStages, "cuda:5"), p);  // every stage listed: the default is unused
  }

  void parseSize_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");  // "x,y,z" or "error"
    QTest::newRow("cube") << "64" << "64,64,64";
    QTest::newRow("x,y,z") << "96,80,64" << "96,80,64";
    QTest::newRow("two numbers") << "96,80" << "error";
    QTest::newRow("four numbers") << "1,2,3,4" << "error";
    QTest::newRow("zero") << "0" << "error";
    QTest::newRow("negative") << "64,-1,64" << "error";
    QTest::newRow("text") << "big" << "error";
    QTest::newRow("trailing text") << "64x" << "error";
  }
  void parseSize() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    if (expected == "error") {
      QVERIFY_THROWS_EXCEPTION(InvalidArgument, run::parseSize(text.toStdString()));
      return;
    }
    const auto s = run::parseSize(text.toStdString());
    QCOMPARE(QString("%1,%2,%3").arg(s[0]).arg(s[1]).arg(s[2]), expected);
  }

  void parseStageList_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");  // sorted, comma-separated, or "error"
    QTest::newRow("empty") << "" << "";
    QTest::newRow("none") << "none" << "";
    QTest::newRow("all") << "all" << "bottleneck,dec0,dec1,enc0,enc1,head";
    QTest::newRow("some") << "dec0,enc0" << "dec0,enc0";
    QTest::newRow("unknown") << "enc0,enc9" << "error";
  }
  void parseStageList() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    if (expected == "error") {
      try {
        run::parseStageList(text.toStdString(), kStages);
        QFAIL("accepted");
      } catch (const InvalidArgument& e) {
        QVERIFY2(QString(e.what()).contains("enc9"), e.what());
      }
      return;
    }
    QStringList got;
    for (const auto& s : run::parseStageList(text.toStdString(), kStages)) got << QString::fromStdString(s);
    QCOMPARE(got.join(','), expected);
  }
};

QTEST_GUILESS_MAIN(RunSpecTest)
#include "RunSpecTest.moc"
