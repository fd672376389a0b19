// Checkpoints load without executing anything and check every tensor before using one: crafted
// files are refused with one line naming the first bad tensor or field, and the network they
// were meant for keeps its weights. Old TorchScript-archive checkpoints are refused with the
// command that converts them, and that conversion keeps weights and step.
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/checkpoint/CheckpointFile.h"
#include "core/checkpoint/PickleCheck.h"
#include "core/engine/LegacyCheckpoint.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"

#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <limits>
#include <torch/torch.h>

using namespace splitseg;

namespace {
std::shared_ptr<model::StagedNetwork> tinyNet(std::uint64_t seed = 3) {
  torch::manual_seed(seed);
  return model::UNet3d(model::UNet3dOptions().base_channels(4).depth(3)).ptr();
}

run::RunSpec spec(model::StagedNetwork& net) {
  run::RunSpec o;
  o.steps = 2;
  o.patch = {16, 16, 16};
  o.seed = 7;
  o.setPlacement(placement::Placement::parse("", net.stageNames(), "cpu"));
  return o;
}

// A trainer after two steps, so weights and Adam moments are not the initial ones.
struct Trained {
  std::shared_ptr<model::StagedNetwork> net = tinyNet();
  engine::Trainer trainer{net, std::make_shared<data::PhantomSource>(), spec(*net)};
  Trained() {
    trainer.step();
    trainer.step();
  }
};

bool sameWeights(model::StagedNetwork& a, model::StagedNetwork& b) {
  const auto pa = a.root().named_parameters(), pb = b.root().named_parameters();
  for (const auto& p : pa)
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  return pa.size() == pb.size();
}

std::string firstWeightName(model::StagedNetwork& net) { return net.root().named_parameters().begin()->key(); }

void writeBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
} // namespace

class CheckpointFileTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string path(const char* name) const { return (std::filesystem::path(dir_.path().toStdString()) / name).string(); }

private Q_SLOTS:
  void roundTripKeepsEverything() {
    Trained t;
    const auto file = path("round.ckpt");
    t.trainer.saveCheckpoint(file);
    const auto read = checkpoint::CheckpointFile::read(file);
    QCOMPARE(read.info.step, std::int64_t(2));
    QCOMPARE(read.model.size(), t.net->root().named_parameters().size() + t.net->root().named_buffers().size());
    QCOMPARE(read.adam.size(), t.net->root().named_parameters().size());
    QVERIFY(read.rng.count("cpu"));
    engine::CheckpointInfo info;
    auto loaded = engine::loadNetwork(file, &info);
    QVERIFY(sameWeights(*loaded, *t.net));
    QCOMPARE(info.run.toJson().dump(), t.trainer.spec().toJson().dump());
  }

  // Each row forges one thing in an otherwise valid checkpoint.
  void forgedCheckpointsAreRefused_data() {
    QTest::addColumn<QString>("forgery");
    QTest::addColumn<QString>("message");
    QTest::newRow("shape") << "shape" << "has shape";
    QTest::newRow("missing tensor") << "missing" << "is missing from the checkpoint";
    QTest::newRow("extra tensor") << "extra" << "is not part of the network";
    QTest::newRow("dtype") << "dtype" << "is Double but the network's is Float";
    QTest::newRow("NaN weights") << "nan" << "NaN or infinite";
    QTest::newRow("adam shape") << "adam-shape" << "adam.";
    QTest::newRow("adam of no parameter") << "adam-stranger" << "not a parameter of the network";
    QTest::newRow("adam options") << "options" << "adam_options";
    QTest::newRow("other network") << "network" << "trained with another network";
    QTest::newRow("generator state") << "rng" << "rng.cpu";
    // The right size and type, but a state LibTorch refuses (found by fuzz_checkpoint): refused
    // before any weight is copied in.
    QTest::newRow("invalid generator state") << "rng-invalid" << "rng.cpu' is not a valid generator state";
  }
  void forgedCheckpointsAreRefused() {
    QFETCH(QString, forgery);
    QFETCH(QString, message);
    Trained t;
    auto f = checkpoint::CheckpointFile::capture(t.net->root(), t.trainer.optimizer(), {t.trainer.spec(), 2, ""});
    const auto first = firstWeightName(*t.net);
    if (forgery == "shape") f.model[first] = torch::zeros({3, 3});
    if (forgery == "missing") f.model.erase(first);
    if (forgery == "extra") f.model["enc0.sneaky"] = torch::zeros({1});
    if (forgery == "dtype") f.model[first] = f.model[first].to(torch::kDouble);
    if (forgery == "nan") f.model[first].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
    if (forgery == "adam-shape") f.adam[first].expAvg = torch::zeros({2});
    if (forgery == "adam-stranger") f.adam["head.nothing"] = f.adam[first];
    if (forgery == "options") f.adamOptions.beta1 = 1.5;
    if (forgery == "network") f.info.run.networkOptions["base_channels"] = 8;
    if (forgery == "rng") f.rng["cpu"] = torch::zeros({16}, torch::kByte);
    if (forgery == "rng-invalid") f.rng["cpu"] = torch::full_like(f.rng["cpu"], 0xff);
    const auto file = path("forged.ckpt");
    f.write(file);

    auto target = tinyNet(11);  // another initialisation: loading must not touch it when refused
    auto before = tinyNet(11);
    torch::optim::Adam adam(target->root().parameters());
    try {
      engine::readCheckpoint(file, *target, adam);
      QFAIL("forged checkpoint was accepted");
    } catch (const Error& e) {
      const QString what = e.what();
      QVERIFY2(what.contains(QString::fromStdString(file)) || forgery == "network", qPrintable(what));
      QVERIFY2(what.contains(message), qPrintable(what));
      QVERIFY2(!what.contains('\n'), qPrintable(what));
    }
    QVERIFY(sameWeights(*target, *before));
    QVERIFY(adam.state().empty());
  }

  // The pickle walk before LibTorch's unpickler: sizes and memo indices a pickle of that size
  // cannot justify are refused (the unpickler would allocate them: a LONG_BINPUT of 2^32 - 1
  // asked for 15.6 GB, found by fuzz_checkpoint), every opcode the protocol has is accepted.
  void pickleWalk_data() {
    QTest::addColumn<QByteArray>("pickle");
    QTest::addColumn<QString>("expected");  // "" = accepted
    QTest::newRow("empty dict") << QByteArray("\x80\x02}q\x00.", 6) << "";
    QTest::newRow("memo index in range") << QByteArray("\x80\x02}r\x01\x00\x00\x00.", 9) << "";
    QTest::newRow("string and int") << QByteArray("\x80\x02X\x02\x00\x00\x00hiK\x07\x86.", 13) << "";
    QTest::newRow("global") << QByteArray("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n.", 36) << "";
    QTest::newRow("memo index 2^32-1") << QByteArray("\x80\x02}r\xff\xff\xff\xff.", 9) << "memo index beyond";
    QTest::newRow("text memo index") << QByteArray("\x80\x02}p99999999\n.", 14) << "memo index beyond";
    QTest::newRow("string longer than the pickle") << QByteArray("\x80\x02X\x00\x00\x00\x80.", 8) << "bytes in a pickle of";
    QTest::newRow("8-byte length") << QByteArray("\x80\x02\x8e\xff\xff\xff\xff\xff\xff\xff\x7f.", 12) << "bytes in a pickle of";
    QTest::newRow("unknown opcode") << QByteArray("\x80\x02\xff.", 4) << "unknown opcode 255";
    QTest::newRow("text runs off") << QByteArray("\x80\x02" "ctorch", 8) << "runs past the end";
    QTest::newRow("no STOP") << QByteArray("\x80\x02}", 3) << "no STOP";
  }
  void pickleWalk() {
    QFETCH(QByteArray, pickle);
    QFETCH(QString, expected);
    try {
      checkpoint::checkPickle(pickle.constData(), static_cast<std::size_t>(pickle.size()), "x.ckpt");
      QVERIFY2(expected.isEmpty(), "accepted");
    } catch (const FormatError& e) {
      QVERIFY2(!expected.isEmpty() && QString(e.what()).contains(expected), e.what());
      QVERIFY(QString(e.what()).contains("x.ckpt"));
    }
  }

  void notCheckpointsAreRefused_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("message");
    QTest::newRow("text") << QByteArray("not a checkpoint") << "not a PyTorch zip archive";
    QTest::newRow("empty") << QByteArray() << "not a PyTorch zip archive";
    QTest::newRow("zip header only") << QByteArray("PK\x03\x04garbage", 11) << "not a readable checkpoint";
  }
  void notCheckpointsAreRefused() {
    QFETCH(QByteArray, content);
    QFETCH(QString, message);
    const auto file = path("junk.ckpt");
    writeBytes(file, std::vector<char>(content.begin(), content.end()));
    try {
      engine::readCheckpointInfo(file);
      QFAIL("accepted");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains(message), e.what());
    }
  }

  void truncatedCheckpointsAreRefused() {
    Trained t;
    const auto file = path("whole.ckpt");
    t.trainer.saveCheckpoint(file);
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (double keep : {0.1, 0.5, 0.9, 0.999}) {
      const auto cut = path("cut.ckpt");
      writeBytes(cut, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() * keep)));
      QVERIFY_THROWS_EXCEPTION(FormatError, engine::readCheckpointInfo(cut));
    }
    QVERIFY_THROWS_EXCEPTION(IoError, engine::readCheckpointInfo(path("missing.ckpt")));
    // A folder or a FIFO is not opened as a checkpoint.
    QVERIFY_THROWS_EXCEPTION(FormatError, engine::readCheckpointInfo(dir_.path().toStdString()));
  }

  // The TorchScript archive of versions 1-2: refused with the conversion command, converted on request.
  void oldFormatIsRefusedAndConverts() {
    Trained t;
    const auto old = path("old.pt");
    {
      torch::serialize::OutputArchive archive, modelArchive, optimArchive;
      t.net->root().save(modelArchive);
      t.trainer.optimizer().save(optimArchive);
      archive.write("model", modelArchive);
      archive.write("optimizer", optimArchive);
      const nlohmann::json meta{{"version", 2}, {"run", t.trainer.spec().toJson()}, {"step", 2}, {"sample_rng", ""}};
      archive.write("meta", c10::IValue(meta.dump()));
      archive.write("torch_rng", torch::globalContext().defaultGenerator(torch::kCPU).get_state());
      archive.save_to(old);
    }
    QVERIFY(checkpoint::isLegacyCheckpoint(old));
    try {
      engine::readCheckpointInfo(old);
      QFAIL("old format was read");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains("splitseg-cli convert-checkpoint"), e.what());
    }
    const auto converted = path("converted.ckpt");
    engine::convertLegacyCheckpoint(old, converted);
    QVERIFY(!checkpoint::isLegacyCheckpoint(converted));
    engine::CheckpointInfo info;
    auto net = engine::loadNetwork(converted, &info);
    QVERIFY(sameWeights(*net, *t.net));
    QCOMPARE(info.step, std::int64_t(2));
    const auto file = checkpoint::CheckpointFile::read(converted);
    const auto first = firstWeightName(*t.net);
    auto& st = static_cast<torch::optim::AdamParamState&>(
        *t.trainer.optimizer().state().at(t.net->root().named_parameters()[first].unsafeGetTensorImpl()));
    QVERIFY(torch::equal(file.adam.at(first).expAvgSq, st.exp_avg_sq()));
    QCOMPARE(file.adam.at(first).step, st.step());
  }

  void damagedMetadataIsRefused_data() {
    QTest::addColumn<QString>("meta");
    QTest::addColumn<QString>("message");
    const auto good = [](const nlohmann::json& change) {
      nlohmann::json m{{"version", 3}, {"run", run::RunSpec().toJson()}, {"step", 1}, {"sample_rng", ""}};
      m.update(change);
      return QString::fromStdString(m.dump());
    };
    QTest::newRow("valid") << good(nlohmann::json::object()) << "";
    QTest::newRow("future version") << good({{"version", 99}}) << "newer than this SplitSeg reads";
    QTest::newRow("version 0") << good({{"version", 0}}) << "does not exist";
    QTest::newRow("negative step") << good({{"step", -4}}) << "step -4 is not a whole number >= 0";
    QTest::newRow("step beyond any integer") << good({{"step", 1e300}}) << "step 1e+300 is not a whole number";
    QTest::newRow("fractional step") << good({{"step", 4.5}}) << "step 4.5 is not a whole number";
    // The fuzzer's find on CI: a float version was cast to int, undefined behaviour.
    QTest::newRow("version beyond any integer") << good({{"version", 2.22222e92}}) << "version 2.22222e+92 does not exist";
    QTest::newRow("version 2^40") << good({{"version", std::int64_t{1} << 40}}) << "does not exist";
    QTest::newRow("step as text") << good({{"step", "4"}}) << "step \"4\" is not a whole number";
    QTest::newRow("not JSON") << "{not json" << "metadata is damaged";
    QTest::newRow("array") << "[1,2]" << "not a JSON object";
    QTest::newRow("huge rng text") << good({{"sample_rng", std::string(100000, '1')}}) << "not a generator state";
    QTest::newRow("bad run") << good({{"run", {{"batch", -1}}}}) << "run description";
  }
  void damagedMetadataIsRefused() {
    QFETCH(QString, meta);
    QFETCH(QString, message);
    try {
      run::CheckpointInfo::fromMetaJson(meta.toStdString(), "x.ckpt");
      QVERIFY2(message.isEmpty(), "damaged metadata was accepted");
    } catch (const FormatError& e) {
      QVERIFY2(!message.isEmpty() && QString(e.what()).contains(message) && QString(e.what()).contains("x.ckpt"), e.what());
    }
  }

  void versionOneMetadataStillParses() {
    const nlohmann::json meta{{"version", 1},
                              {"architecture", "unet3d"},
                              {"options", {{"base_channels", 4}, {"depth", 3}}},
                              {"placement", {{"stages", {{"enc0", "cpu"}, {"head", "cpu"}}}}},
                              {"precision", "bf16:enc0"},
                              {"step", 7},
                              {"learning_rate", 0.002},
                              {"patch", {48, 32, 16}},
                              {"batch", 2},
                              {"seed", 5},
                              {"preprocessing", nlohmann::json::object()},
                              {"sample_rng", ""}};
    const auto info = run::CheckpointInfo::fromMetaJson(meta.dump(), "v1.pt");
    QCOMPARE(info.step, std::int64_t(7));
    QCOMPARE(info.run.architecture, std::string("unet3d"));
    QCOMPARE(info.run.networkOptions.at("depth").get<int>(), 3);
    QCOMPARE(info.run.placement.at("enc0"), std::string("cpu"));
    QCOMPARE(info.run.precision.toString(), std::string("bf16:enc0"));
    QVERIFY((info.run.patch == std::array<std::int64_t, 3>{48, 32, 16}));
    QCOMPARE(info.run.batch, 2);
    QCOMPARE(info.run.learningRate, 0.002);
    QCOMPARE(info.run.seed, std::uint64_t(5));
    // Without a patch, version 1's default (32^3), not today's.
    auto noPatch = meta;
    noPatch.erase("patch");
    QVERIFY((run::CheckpointInfo::fromMetaJson(noPatch.dump(), "v1.pt").run.patch == std::array<std::int64_t, 3>{32, 32, 32}));
  }

  // Version 1's numbers go through the run description's checked reader, not a cast.
  void versionOneNumbersAreChecked_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("message");
    QTest::newRow("batch 1e300") << "batch" << "1e300" << "batch: expected a whole number";
    QTest::newRow("batch 2^40") << "batch" << "1099511627776" << "batch: too large";
    QTest::newRow("patch of floats") << "patch" << "[1e300, 32, 32]" << "patch";
    QTest::newRow("negative seed") << "seed" << "-1" << "seed: must not be negative";
    QTest::newRow("seed 1.5") << "seed" << "1.5" << "seed: expected a whole number";
    QTest::newRow("learning rate text") << "learning_rate" << "\"fast\"" << "learning_rate";
  }
  void versionOneNumbersAreChecked() {
    QFETCH(QString, field);
    QFETCH(QString, value);
    QFETCH(QString, message);
    nlohmann::json meta{{"version", 1},          {"architecture", "unet3d"}, {"options", {{"base_channels", 4}}},
                        {"placement", {{"enc0", "cpu"}}}, {"step", 7},    {"sample_rng", ""}};
    meta[field.toStdString()] = nlohmann::json::parse(value.toStdString());
    try {
      run::CheckpointInfo::fromMetaJson(meta.dump(), "v1.pt");
      QFAIL("version-1 metadata with a bad number was accepted");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains(message) && QString(e.what()).contains("v1.pt"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(CheckpointFileTest)
#include "CheckpointFileTest.moc"
