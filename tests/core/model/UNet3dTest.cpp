// The default options must rebuild the seed network exactly, stage by stage.
#include "core/base/Error.h"
#include "core/model/UNet3d.h"

#include "core/base/Error.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg::model;

class UNet3dTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // The seed network: base 32, depth 5, no norm layers.
  void seedNetworkParameterCount() {
    UNet3d net(UNet3dOptions().norm(Norm::None));
    QCOMPARE(net->parameterCount(), std::int64_t{22575329});
  }

  void stageNamesAndChannels() {
    UNet3d net(UNet3dOptions{});
    const auto specs = net->stageSpecs();
    QStringList names;
    for (const auto& s : specs) names << QString::fromStdString(s.name);
    QCOMPARE(names, QStringList({"enc0", "enc1", "enc2", "enc3", "bottleneck", "dec3", "dec2", "dec1", "dec0", "head"}));
    const std::vector<std::int64_t> out{32, 64, 128, 256, 512, 256, 128, 64, 32, 1};
    for (std::size_t i = 0; i < specs.size(); ++i) QCOMPARE(specs[i].outChannels, out[i]);
    // Decoders take the stage below and their encoder twin's output.
    QCOMPARE(specs[5].inputs, (std::vector<std::string>{"bottleneck", "enc3"}));
    QCOMPARE(specs[8].inputs, (std::vector<std::string>{"dec1", "enc0"}));
  }

  void perStageParameters_data() {
    QTest::addColumn<int>("stage");
    QTest::addColumn<qint64>("params");
    // conv k^3*cin*cout + cout, transposed conv 8*cin*cout + cout.
    QTest::newRow("enc0") << 0 << qint64(27 * 1 * 32 + 32 + 27 * 32 * 32 + 32);
    QTest::newRow("bottleneck") << 4 << qint64(27 * 256 * 512 + 512 + 27 * 512 * 512 + 512);
    QTest::newRow("dec3") << 5 << qint64(8 * 512 * 256 + 256 + 27 * 512 * 256 + 256 + 27 * 256 * 256 + 256);
    QTest::newRow("head") << 9 << qint64(32 + 1);
  }
  void perStageParameters() {
    QFETCH(int, stage);
    QFETCH(qint64, params);
    UNet3d net(UNet3dOptions().norm(Norm::None));
    QCOMPARE(qint64(net->stageParameterCount(static_cast<std::size_t>(stage))), params);
  }

  void outputShape_data() {
    QTest::addColumn<int>("depth");
    QTest::addColumn<int>("size");
    QTest::newRow("depth3") << 3 << 16;
    QTest::newRow("depth5") << 5 << 32;
  }
  void outputShape() {
    QFETCH(int, depth);
    QFETCH(int, size);
    UNet3d net(UNet3dOptions().base_channels(4).depth(depth).out_channels(3));
    QCOMPARE(int(net->stageSpecs().size()), 2 * depth);
    auto y = net->forward(torch::randn({2, 1, size, size, size}));
    QCOMPARE(y.sizes().vec(), (std::vector<std::int64_t>{2, 3, size, size, size}));
  }

  // Absurd options are refused by name before anything is allocated (depth 100 would ask for
  // 32 << 99 channels).
  void absurdOptionsRefused_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("field");
    QTest::newRow("depth 1") << R"({"depth":1})" << "depth";
    QTest::newRow("depth 9") << R"({"depth":9})" << "depth";
    QTest::newRow("depth 100") << R"({"depth":100})" << "depth";
    QTest::newRow("base 0") << R"({"base_channels":0})" << "base_channels";
    QTest::newRow("base 4096") << R"({"base_channels":4096})" << "base_channels";
    QTest::newRow("in 0") << R"({"in_channels":0})" << "in_channels";
    QTest::newRow("out 2000") << R"({"out_channels":2000})" << "out_channels";
  }
  void absurdOptionsRefused() {
    QFETCH(QString, json);
    QFETCH(QString, field);
    try {
      UNet3d net(UNet3dOptions::fromJson(json.toStdString()));
      QFAIL("accepted");
    } catch (const splitseg::InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains(field), e.what());
    }
  }

  // Instance norm unless the options say otherwise; files written by SplitSeg always name their
  // norm ("none" for the runs before it became the default), so they keep their network.
  void normByDefault_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<bool>("normLayers");
    QTest::newRow("no options") << "" << true;
    QTest::newRow("options without norm") << R"({"base_channels":4,"depth":3})" << true;
    QTest::newRow("norm none, as older files say") << R"({"base_channels":4,"depth":3,"norm":"none"})" << false;
  }
  void normByDefault() {
    QFETCH(QString, json);
    QFETCH(bool, normLayers);
    const auto o = json.isEmpty() ? UNet3dOptions{} : UNet3dOptions::fromJson(json.toStdString());
    QCOMPARE(o.norm() == Norm::Instance, normLayers);
    UNet3d net(o);
    // Each conv block is conv, [norm], ReLU: the norm's affine weight is the block's second entry.
    bool found = false;
    for (const auto& p : net->named_parameters())
      if (p.key().find("convs.1.weight") != std::string::npos) found = true;
    QCOMPARE(found, normLayers);
  }

  void optionsJsonRoundTrip() {
    auto o = UNet3dOptions().base_channels(8).depth(4).norm(Norm::Instance);
    auto back = UNet3dOptions::fromJson(o.toJson());
    QCOMPARE(back.toJson(), o.toJson());
    QVERIFY_THROWS_EXCEPTION(std::exception, UNet3dOptions::fromJson("{\"norm\": \"group\"}"));
  }

  // Issue 15: options from shared files have upper bounds; the error names the field.
  void optionBounds_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("field");
    QTest::newRow("depth 100") << R"({"depth":100})" << "depth";
    QTest::newRow("depth 2^32+2 (wraps to 2 as int)") << R"({"depth":4294967298})" << "depth";
    QTest::newRow("depth 1") << R"({"depth":1})" << "depth";
    QTest::newRow("base channels 100000") << R"({"base_channels":100000})" << "base_channels";
    QTest::newRow("bottleneck too wide") << R"({"base_channels":256,"depth":8})" << "base_channels";
    QTest::newRow("65536 classes") << R"({"out_channels":65536})" << "out_channels";
    QTest::newRow("in channels 1000") << R"({"in_channels":1000})" << "in_channels";
    QTest::newRow("negative in channels") << R"({"in_channels":-1})" << "in_channels";
    QTest::newRow("dropout 1.5") << R"({"dropout":[1.5]})" << "dropout";
    QTest::newRow("depth as text") << R"({"depth":"5"})" << "depth";
  }
  void optionBounds() {
    QFETCH(QString, json);
    QFETCH(QString, field);
    try {
      UNet3dOptions::fromJson(json.toStdString());
      QFAIL("no error");
    } catch (const splitseg::InvalidArgument& e) {
      QVERIFY2(std::string(e.what()).find(field.toStdString()) != std::string::npos, e.what());
    }
  }
  void constructorChecksBounds() {
    QVERIFY_THROWS_EXCEPTION(splitseg::InvalidArgument, UNet3d(UNet3dOptions().depth(9)));
    QVERIFY_THROWS_EXCEPTION(splitseg::InvalidArgument, UNet3d(UNet3dOptions().out_channels(257)));
    QVERIFY_THROWS_EXCEPTION(splitseg::InvalidArgument, UNet3d(UNet3dOptions().base_channels(1 << 20)));
    QVERIFY_THROWS_EXCEPTION(splitseg::InvalidArgument, UNet3d(UNet3dOptions().in_channels(65)));
    UNet3d ok(UNet3dOptions().base_channels(2).depth(8).out_channels(256).in_channels(64));
    QCOMPARE(int(ok->stageSpecs().size()), 16);
  }
};

QTEST_GUILESS_MAIN(UNet3dTest)
#include "UNet3dTest.moc"
