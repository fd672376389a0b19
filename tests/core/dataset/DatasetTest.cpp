// Dataset layouts (MSD, nnU-Net raw, pairs), validation errors, seeded split and the
// DatasetSource that the Trainer consumes. Phantoms written to NIfTI in a temp folder.
#include "core/base/Error.h"
#include "core/data/Phantom.h"
#include "core/dataset/DatasetSource.h"
#include "core/io/VolumeWriter.h"
#include "tests/support/PhantomDataset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace splitseg;
using namespace splitseg::dataset;

namespace {

void writeText(const fs::path& p, const std::string& t) {
  std::ofstream f(p);
  f << t;
}

data::Phantom phantom(std::uint64_t seed, std::array<std::int64_t, 3> size = {20, 18, 16}) {
  data::PhantomOptions o;
  o.size = size;
  o.spacing = {1.2, 1.2, 2.0};
  o.seed = seed;
  return data::makePhantom(o);
}

// MSD: imagesTr/case_N.nii.gz, labelsTr/case_N.nii.gz, dataset.json with "training".
fs::path makeMsd(const fs::path& root, int n) {
  checks::PhantomDatasetOptions o;
  o.cases = n;
  o.size = {20, 18, 16};
  o.spacing = {1.2, 1.2, 2.0};
  return checks::writePhantomDataset(root, o);
}

// nnU-Net raw: imagesTr/<id>_0000.nii.gz, labelsTr/<id>.nii.gz, v2 dataset.json.
fs::path makeNnUnet(const fs::path& root, int n, int channels = 1) {
  fs::create_directories(root / "imagesTr");
  fs::create_directories(root / "labelsTr");
  for (int i = 0; i < n; ++i) {
    const auto p = phantom(static_cast<std::uint64_t>(100 + i));
    char id[32];
    std::snprintf(id, sizeof id, "toy_%03d", i);
    for (int c = 0; c < channels; ++c) {
      char f[48];
      std::snprintf(f, sizeof f, "%s_%04d.nii.gz", id, c);
      io::writeVolume(p.image, (root / "imagesTr" / f).string());
    }
    io::writeVolume(p.label, (root / "labelsTr" / (std::string(id) + ".nii.gz")).string());
  }
  std::string ch;
  for (int c = 0; c < channels; ++c) ch += std::string(c ? "," : "") + "\"" + std::to_string(c) + "\":\"MR" + std::to_string(c) + "\"";
  writeText(root / "dataset.json", R"({"channel_names":{)" + ch + R"(},"labels":{"background":0,"blob":1},"numTraining":)" +
                                       std::to_string(n) + R"(,"file_ending":".nii.gz"})");
  return root;
}

} // namespace

class DatasetTest : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path dir(const std::string& n) const { return fs::path(tmp_.path().toStdString()) / n; }

private Q_SLOTS:
  void msdLayout() {
    const Dataset d = openDataset(makeMsd(dir("msd"), 3).string());
    QVERIFY(d.layout == Layout::Msd);
    QCOMPARE(d.name, std::string("Toy"));
    QCOMPARE(d.cases.size(), std::size_t(3));
    QCOMPARE(d.cases[1].id, std::string("case_1"));
    QCOMPARE(d.channelNames, std::vector<std::string>{"CT"});
    QCOMPARE(d.foregroundClasses(), 1);
    QVERIFY(fs::exists(d.cases[2].label));
    validateGeometry(d);
  }

  void nnunetLayout() {
    const Dataset d = openDataset(makeNnUnet(dir("nnunet"), 4, 2).string());
    QVERIFY(d.layout == Layout::NnUnetRaw);
    QCOMPARE(d.cases.size(), std::size_t(4));
    QCOMPARE(d.channelCount(), 2);
    QCOMPARE(d.cases[0].id, std::string("toy_000"));
    QVERIFY(d.cases[3].images[1].find("toy_003_0001.nii.gz") != std::string::npos);
    QCOMPARE(d.labels.at(1), std::string("blob"));
    validateGeometry(d);
  }

  void pairs() {
    const auto root = makeMsd(dir("pairs"), 1);
    const Dataset d = datasetFromPairs({{(root / "imagesTr/case_0.nii.gz").string(), (root / "labelsTr/case_0.nii.gz").string()}});
    QCOMPARE(d.cases.size(), std::size_t(1));
    QVERIFY_THROWS_EXCEPTION(IoError, datasetFromPairs({{"/nonexistent.nii.gz", "/nonexistent2.nii.gz"}}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, datasetFromPairs({}));
  }

  void split() {
    const Split a = splitCases(10, 0.2, 7), b = splitCases(10, 0.2, 7), c = splitCases(10, 0.2, 8);
    QCOMPARE(a.validation.size(), std::size_t(2));
    QCOMPARE(a.train.size(), std::size_t(8));
    QCOMPARE(a.validation, b.validation);
    QVERIFY(a.validation != c.validation || a.train != c.train);
    std::vector<std::size_t> all = a.train;
    all.insert(all.end(), a.validation.begin(), a.validation.end());
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < 10; ++i) QCOMPARE(all[i], i);
    QCOMPARE(splitCases(1, 0.5, 0).train.size(), std::size_t(1));
  }

  // Each row breaks a fresh MSD dataset in one way; openDataset/validate/load must name the file.
  void broken_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("error");     // IoError | FormatError
    QTest::addColumn<QString>("fileEnds");  // path() must end with this
    QTest::addColumn<QString>("message");
    QTest::newRow("no dataset.json") << "nojson" << "IoError" << "dataset.json" << "no such file";
    QTest::newRow("bad json") << "badjson" << "FormatError" << "dataset.json" << "not valid JSON";
    // Found by fuzz_dataset_json: a field of the wrong kind escaped as a JSON library exception.
    QTest::newRow("name is an object") << "nameObject" << "FormatError" << "dataset.json" << "wrong kind";
    QTest::newRow("empty training") << "empty" << "FormatError" << "dataset.json" << "no training cases";
    QTest::newRow("numTraining wrong") << "count" << "FormatError" << "dataset.json" << "numTraining";
    QTest::newRow("listed file missing") << "missing" << "FormatError" << "dataset.json" << "does not exist";
    QTest::newRow("no background label") << "nobg" << "FormatError" << "dataset.json" << "background";
    QTest::newRow("size mismatch") << "size" << "FormatError" << "case_0.nii.gz" << "size 20x18x16 vs 20x18x15";
    QTest::newRow("spacing mismatch") << "spacing" << "FormatError" << "case_0.nii.gz" << "spacing";
    QTest::newRow("undeclared label value") << "labelvalue" << "FormatError" << "labelsTr/case_0.nii.gz" << "not declared";
    // Issue 50: a label value that is not a whole number is refused for that reason, named with
    // its voxel and the file's pixel type (never cast to int: 1e10 would be undefined behaviour).
    QTest::newRow("label value 0.5") << "labelHalf" << "FormatError" << "labelsTr/case_0.nii.gz"
                                     << "label value 0.5 at voxel (3,4,5) is not a whole number (labels hold whole numbers; this file stores float32)";
    QTest::newRow("label value 1e10") << "label1e10" << "FormatError" << "labelsTr/case_0.nii.gz"
                                      << "label value 1e+10 at voxel (3,4,5) is a whole number outside the range of label values (labels hold whole numbers from -2147483648 to 2147483647; this file stores float32)";
    QTest::newRow("label value 1.0001") << "labelNearOne" << "FormatError" << "labelsTr/case_0.nii.gz"
                                        << "label value 1.0001 at voxel (3,4,5) is not a whole number (labels hold whole numbers; this file stores float32)";
    QTest::newRow("NaN in image") << "nan" << "FormatError" << "imagesTr/case_0.nii.gz" << "NaN";
    QTest::newRow("nnU-Net channel missing") << "channel" << "FormatError" << "dataset.json" << "channel 1";
    // Issue 15: bounded labels (one network output per value) and confined paths.
    QTest::newRow("label value 65535") << "label65535" << "FormatError" << "dataset.json" << "0..255";
    QTest::newRow("label value 256 (v2)") << "label256" << "FormatError" << "dataset.json" << "0..255";
    QTest::newRow("label value 2^32+1") << "labelWrap" << "FormatError" << "dataset.json" << "above 255";
    QTest::newRow("absolute entry") << "absolute" << "FormatError" << "dataset.json" << "absolute";
    QTest::newRow("entry leaves the folder") << "dotdot" << "FormatError" << "dataset.json" << "leaves its folder";
    QTest::newRow("entry symlinks out") << "symlink" << "FormatError" << "dataset.json" << "outside its folder";
    QTest::newRow("entry is a FIFO") << "fifo" << "FormatError" << "dataset.json" << "FIFO";
    QTest::newRow("nnU-Net file symlinks out") << "nnSymlink" << "FormatError" << "dataset.json" << "outside its folder";
  }
  void broken() {
    QFETCH(QString, kind);
    QFETCH(QString, error);
    QFETCH(QString, fileEnds);
    QFETCH(QString, message);
    const std::string k = kind.toStdString();
    const bool nn = k == "channel" || k == "nnSymlink";
    const fs::path root = nn ? makeNnUnet(dir("b_" + k), 2, 1) : makeMsd(dir("b_" + k), 2);
    const std::string img0 = (root / "imagesTr/case_0.nii.gz").string(), lab0 = (root / "labelsTr/case_0.nii.gz").string();
    if (k == "nojson") fs::remove(root / "dataset.json");
    if (k == "badjson") writeText(root / "dataset.json", "{\"name\": ");
    if (k == "nameObject")
      writeText(root / "dataset.json", R"({"name":{"0":"CT"},"labels":{"0":"bg","1":"x"},"training":[]})");
    if (k == "empty") writeText(root / "dataset.json", R"({"labels":{"0":"bg","1":"x"},"training":[]})");
    if (k == "count") writeText(root / "dataset.json", R"({"labels":{"0":"bg","1":"x"},"numTraining":5,"training":[{"image":"./imagesTr/case_0.nii.gz","label":"./labelsTr/case_0.nii.gz"}]})");
    if (k == "missing") fs::remove(root / "labelsTr/case_1.nii.gz");
    if (k == "nobg") writeText(root / "dataset.json", R"({"labels":{"1":"x"},"training":[{"image":"./imagesTr/case_0.nii.gz","label":"./labelsTr/case_0.nii.gz"}]})");
    if (k == "size") io::writeVolume(phantom(0, {20, 18, 15}).label, lab0);
    if (k == "spacing") {
      auto p = phantom(0);
      p.label.geometry().spacing[2] = 3.0;
      io::writeVolume(p.label, lab0);
    }
    if (k == "labelvalue") {
      auto p = phantom(0);
      p.label.at(3, 3, 3) = 3.0f;
      io::writeVolume(p.label, lab0);
    }
    if (k == "labelHalf" || k == "label1e10" || k == "labelNearOne") {
      auto p = phantom(0);
      p.label.setPixelType("float32");
      p.label.at(3, 4, 5) = k == "labelHalf" ? 0.5f : k == "label1e10" ? 1e10f : 1.0001f;
      p.label.at(6, 6, 6) = 3.0f;  // undeclared too, but later: the not-whole value is the reason
      io::writeVolume(p.label, lab0);
    }
    if (k == "nan") {
      auto p = phantom(0);
      p.image.setPixelType("float32");
      p.image.at(1, 1, 1) = std::nanf("");
      io::writeVolume(p.image, img0);
    }
    const std::string pair = R"({"image":"./imagesTr/case_0.nii.gz","label":"./labelsTr/case_0.nii.gz"})";
    auto msdJson = [&](const std::string& labels, const std::string& extra) {
      writeText(root / "dataset.json", R"({"labels":)" + labels + R"(,"training":[)" + pair + extra + "]}");
    };
    if (k == "label65535") msdJson(R"({"0":"bg","1":"x","65535":"y"})", "");
    if (k == "label256") msdJson(R"({"background":0,"x":1,"y":256})", "");
    if (k == "labelWrap") msdJson(R"({"background":0,"x":4294967297})", "");
    if (k == "absolute") msdJson(R"({"0":"bg","1":"x"})", R"(,{"image":")" + img0 + R"(","label":"./labelsTr/case_1.nii.gz"})");
    if (k == "dotdot" || k == "symlink") {
      fs::copy_file(img0, dir("outside_" + k + ".nii.gz"), fs::copy_options::overwrite_existing);
      if (k == "symlink") fs::create_symlink("../../outside_symlink.nii.gz", root / "imagesTr/link.nii.gz");
      msdJson(R"({"0":"bg","1":"x"})", k == "dotdot" ? R"(,{"image":"../outside_dotdot.nii.gz","label":"./labelsTr/case_1.nii.gz"})"
                                                     : R"(,{"image":"imagesTr/link.nii.gz","label":"./labelsTr/case_1.nii.gz"})");
    }
    if (k == "fifo") {
      fs::remove(root / "labelsTr/case_1.nii.gz");
      QCOMPARE(::mkfifo((root / "labelsTr/case_1.nii.gz").c_str(), 0600), 0);
    }
    if (k == "nnSymlink") {
      const fs::path victim = root / "imagesTr/toy_001_0000.nii.gz";
      fs::copy_file(victim, dir("outside_nn.nii.gz"), fs::copy_options::overwrite_existing);
      fs::remove(victim);
      fs::create_symlink("../../outside_nn.nii.gz", victim);
    }
    if (k == "channel")
      writeText(root / "dataset.json", R"({"channel_names":{"0":"T1","1":"T2"},"labels":{"background":0,"x":1},"file_ending":".nii.gz"})");
    try {
      DatasetSourceOptions o;
      o.validationFraction = 0;
      DatasetSource source(openDataset(root.string()), o);
      for (std::size_t i = 0; i < source.dataset().cases.size(); ++i) source.prepared(i);
      QFAIL("no error");
    } catch (const FormatError& e) {
      QCOMPARE(QString("FormatError"), error);
      QVERIFY2(QString::fromStdString(e.path()).endsWith(fileEnds), qPrintable(QString::fromStdString(e.path())));
      QVERIFY2(std::string(e.what()).find(message.toStdString()) != std::string::npos, e.what());
      if (message.startsWith("label value "))  // issue 50 rows: the whole message, exactly
        QCOMPARE(QString::fromUtf8(e.what()), QString::fromStdString(lab0) + ": " + message);
      if (k == "size" || k == "spacing") QVERIFY2(std::string(e.what()).find(img0) != std::string::npos, e.what());
    } catch (const IoError& e) {
      QCOMPARE(QString("IoError"), error);
      QVERIFY2(QString::fromStdString(e.path()).endsWith(fileEnds), qPrintable(QString::fromStdString(e.path())));
      QVERIFY2(std::string(e.what()).find(message.toStdString()) != std::string::npos, e.what());
    }
  }

  void sourceServesPatches() {
    DatasetSourceOptions o;
    o.validationFraction = 0.25;
    o.preprocessing.targetSpacing = {1.5, 1.5, 1.5};
    o.preprocessing.intensity = intensityPreset("mr-zscore");
    DatasetSource source(openDataset(makeNnUnet(dir("src"), 4, 2).string()), o);
    QCOMPARE(source.channelCount(), 2);
    QCOMPARE(source.foregroundClasses(), 1);
    QCOMPARE(source.split().validation.size(), std::size_t(1));
    std::mt19937_64 rng(1);
    int withFg = 0;
    for (int i = 0; i < 30; ++i) {
      const data::Sample s = source.next({8, 8, 8}, rng);
      QCOMPARE(s.channels.size(), std::size_t(2));
      QCOMPARE(s.label.size(), (std::array<std::int64_t, 3>{8, 8, 8}));
      for (float v : s.label.voxels()) QVERIFY(v == 0.0f || v == 1.0f);
      withFg += std::any_of(s.label.voxels().begin(), s.label.voxels().end(), [](float v) { return v > 0; });
    }
    QVERIFY(withFg >= 10);
    const auto c = source.prepared(0);
    QCOMPARE(c->whole.label.geometry().spacing[2], 1.5);
    QVERIFY(source.cachedBytes() > 0);
    const auto v1 = source.validation({8, 8, 8}), v2 = source.validation({8, 8, 8});
    QCOMPARE(v1.size(), std::size_t(2));
    QVERIFY(v1[0].channels[0].voxels() == v2[0].channels[0].voxels());
    // The JSON the Trainer stores gives back the same preprocessing.
    const Preprocessing back = Preprocessing::fromJson(source.preprocessingJson());
    QCOMPARE(back.targetSpacing, o.preprocessing.targetSpacing);
    QVERIFY(back.intensity.mode == IntensityMode::ZScore);
    QVERIFY(!source.describe().empty());
  }
};

QTEST_GUILESS_MAIN(DatasetTest)
#include "DatasetTest.moc"
