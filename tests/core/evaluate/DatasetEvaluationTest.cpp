// A dataset's cases predicted through a callback, written and scored (core/evaluate): what the
// files on disk hold is scored again here, independently, and compared with the report; failures,
// cancellation and refusals leave the dataset and the other cases alone.
#include "core/base/Error.h"
#include "core/data/Phantom.h"
#include "core/dataset/Dataset.h"
#include "core/evaluate/DatasetEvaluation.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "tests/support/PhantomDataset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace splitseg;

namespace {
void writeText(const fs::path& p, const std::string& t) {
  std::ofstream f(p);
  f << t;
}

// MSD layout, `n` phantoms of two labels.
fs::path makeDataset(const fs::path& root, int n) {
  checks::PhantomDatasetOptions o;
  o.cases = n;
  o.size = {18, 16, 14};
  o.spacing = {1.0, 1.5, 2.0};
  o.firstSeed = 7;
  o.labels = {"a", "b"};
  o.labelPixelType = "uint8";
  return checks::writePhantomDataset(root, o);
}

// Predicts each case from its own ground truth, altered as `mode` says; the observer tells it the case.
struct FromTruth final : evaluate::EvaluationObserver {
  QString mode;
  std::string label;
  int cancelAt = -1;
  void caseStarted(std::size_t k, const evaluate::CaseFiles& f) override {
    if (static_cast<int>(k) == cancelAt) throw Cancelled();
    label = f.label;
  }
  Volume operator()(const Volume& source) const {
    Volume v = io::readVolume(label);
    const auto s = v.size();
    if (mode == "empty") v = Volume(v.geometry(), 0.0f);
    if (mode == "shifted") {  // one voxel along x: the labels' borders disagree
      Volume w(v.geometry(), 0.0f);
      for (std::int64_t z = 0; z < s[2]; ++z)
        for (std::int64_t y = 0; y < s[1]; ++y)
          for (std::int64_t x = 1; x < s[0]; ++x) w.at(x, y, z) = v.at(x - 1, y, z);
      v = w;
    }
    if (mode == "stray") v.at(0, 0, 0) = 2.0f;  // a lone voxel far from label 2's region
    v.geometry() = source.geometry();
    return v;
  }
};

// Dice of label l between two volumes of one grid, counted here.
double diceOf(const Volume& p, const Volume& t, int l) {
  std::int64_t both = 0, np = 0, nt = 0;
  const auto s = p.size();
  for (std::int64_t z = 0; z < s[2]; ++z)
    for (std::int64_t y = 0; y < s[1]; ++y)
      for (std::int64_t x = 0; x < s[0]; ++x) {
        const bool a = std::lround(p.at(x, y, z)) == l, b = std::lround(t.at(x, y, z)) == l;
        both += a && b;
        np += a;
        nt += b;
      }
  return np + nt == 0 ? 1.0 : 2.0 * static_cast<double>(both) / static_cast<double>(np + nt);
}

nlohmann::json readJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}
} // namespace

class DatasetEvaluationTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void scoresWhatItWrote_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<QString>("cases");
    QTest::addColumn<int>("expectedCases");
    QTest::newRow("exact, all cases") << "exact" << "all" << 4;
    QTest::newRow("shifted, validation split") << "shifted" << "validation" << 1;
    QTest::newRow("shifted, training split") << "shifted" << "training" << 3;
    QTest::newRow("empty prediction") << "empty" << "all" << 4;
  }
  void scoresWhatItWrote() {
    QFETCH(QString, mode);
    QFETCH(QString, cases);
    QFETCH(int, expectedCases);
    QTemporaryDir tmp;
    const auto root = makeDataset(fs::path(tmp.path().toStdString()) / "ds", 4);
    const auto ds = dataset::openDataset(root.string());
    const std::string out = tmp.path().toStdString() + "/pred";
    const auto plan = evaluate::planEvaluation(ds, evaluate::caseSetFromString(cases.toStdString()), 0.2, out);
    QCOMPARE(static_cast<int>(plan.files.size()), expectedCases);
    // The validation side is what training holds out: splitCases(4, 0.2, 0).
    const auto split = dataset::splitCases(4, 0.2, 0);
    if (cases == "validation") QCOMPARE(plan.files[0].id, ds.cases[split.validation[0]].id);
    FromTruth p;
    p.mode = mode;
    const auto s = evaluate::evaluateDataset(plan, [&p](const Volume& v) { return p(v); }, false, {{"window", "96"}}, &p);
    QCOMPARE(s.failed, 0);
    QCOMPARE(static_cast<int>(s.cases.size()), expectedCases);
    double sumOfMeans[3] = {0, 0, 0};
    int counted[3] = {0, 0, 0};
    for (const auto& c : s.cases) {
      // The file written is on the image's grid and scores, counted here, as reported.
      const Volume written = io::readVolume(c.files.prediction), truth = io::readVolume(c.files.label),
                   image = io::readVolume(c.files.image);
      QVERIFY(written.geometry().sameGrid(image.geometry()));
      QCOMPARE(static_cast<int>(c.metrics.size()), 2);
      for (const auto& m : c.metrics) {
        const double d = diceOf(written, truth, m.label);
        QVERIFY2(std::abs(d - m.dice) < 1e-12, qPrintable(QString("%1 label %2: %3 vs %4").arg(QString::fromStdString(c.files.id)).arg(m.label).arg(d).arg(m.dice)));
        if (mode == "exact") QCOMPARE(m.hd95, 0.0);
        if (mode == "empty") QVERIFY(std::isinf(m.hd95) && m.dice == 0.0);
        if (mode == "shifted") QVERIFY(m.dice > 0.3 && m.dice < 1.0 && m.hd95 > 0.0 && std::isfinite(m.hd95));
        sumOfMeans[m.label] += m.dice;
        ++counted[m.label];
      }
    }
    // summary.json: the per-label means over the cases, the run's fields, every case.
    const auto j = readJson(s.summaryPath);
    QCOMPARE(j["window"].get<std::string>(), std::string("96"));
    QCOMPARE(j["cases"].get<std::string>(), cases.toStdString());
    QCOMPARE(j["metric_per_case"].size(), static_cast<std::size_t>(expectedCases));
    QCOMPARE(j["labels"].size(), std::size_t(2));
    double overall = 0;
    for (const auto& l : j["labels"]) {
      const int label = l["label"].get<int>();
      QCOMPARE(l["cases"].get<int>(), counted[label]);
      QVERIFY(std::abs(l["mean_dice"].get<double>() - sumOfMeans[label] / counted[label]) < 1e-12);
      if (mode == "empty") QCOMPARE(l["infinite_hd95"].get<int>(), expectedCases);
      overall += l["mean_dice"].get<double>();
    }
    QVERIFY(std::abs(j["mean_dice"].get<double>() - overall / 2) < 1e-12);
    QCOMPARE(s.line["summary"].get<std::string>(), s.summaryPath);
  }

  void keepsTheLargestRegionBeforeWriting() {
    QTemporaryDir tmp;
    const auto root = makeDataset(fs::path(tmp.path().toStdString()) / "ds", 2);
    const auto plan = evaluate::planEvaluation(dataset::openDataset(root.string()), evaluate::CaseSet::All, 0.2, tmp.path().toStdString() + "/p");
    FromTruth p;
    p.mode = "stray";
    const auto s = evaluate::evaluateDataset(plan, [&p](const Volume& v) { return p(v); }, true, {}, &p);
    for (const auto& c : s.cases) {
      int removed = 0;
      for (const auto& k : c.kept) removed += static_cast<int>(k.removed);
      QCOMPARE(removed, 1);  // the stray voxel, and nothing else
      QCOMPARE(io::readVolume(c.files.prediction).at(0, 0, 0), 0.0f);
      for (const auto& m : c.metrics) QCOMPARE(m.dice, 1.0);
    }
  }

  void aFailedCaseLetsTheOthersGoOn() {
    QTemporaryDir tmp;
    const auto root = makeDataset(fs::path(tmp.path().toStdString()) / "ds", 4);
    const auto ds = dataset::openDataset(root.string());
    // Case 1's image corrupted; case 2's label on another grid.
    writeText(ds.cases[1].images[0], "not a NIfTI file");
    data::PhantomOptions o;
    o.size = {10, 10, 10};
    io::writeVolume(data::makePhantom(o).label, ds.cases[2].label, {"uint8"});
    const auto labelBefore = io::readVolume(ds.cases[2].label);
    const auto plan = evaluate::planEvaluation(ds, evaluate::CaseSet::All, 0.2, tmp.path().toStdString() + "/p");
    FromTruth p;
    p.mode = "exact";
    std::vector<std::string> seen;
    struct Both final : evaluate::EvaluationObserver {
      FromTruth* p;
      std::vector<std::string>* seen;
      void caseStarted(std::size_t k, const evaluate::CaseFiles& f) override { p->caseStarted(k, f); }
      void caseFinished(std::size_t, const evaluate::CaseResult& r) override { seen->push_back(r.files.id + (r.ok() ? "" : "!")); }
    } both;
    both.p = &p;
    both.seen = &seen;
    const auto s = evaluate::evaluateDataset(plan, [&p](const Volume& v) { return p(v); }, false, {}, &both);
    QCOMPARE(s.failed, 2);
    QCOMPARE(seen, (std::vector<std::string>{"case_0", "case_1!", "case_2!", "case_3"}));
    QVERIFY2(s.cases[2].error.find("not on the grid") != std::string::npos, s.cases[2].error.c_str());
    QVERIFY(!fs::exists(s.cases[1].files.prediction) && !fs::exists(s.cases[2].files.prediction));
    QVERIFY(fs::exists(s.cases[3].files.prediction));
    const auto j = readJson(s.summaryPath);
    QCOMPARE(j["predicted"].get<int>(), 2);
    QCOMPARE(j["failed"].size(), std::size_t(2));
    QCOMPARE(j["failed"][0]["case"].get<std::string>(), std::string("case_1"));
    QCOMPARE(j["mean_dice"].get<double>(), 1.0);
    // The inputs are as they were.
    QVERIFY(io::readVolume(ds.cases[2].label).size() == labelBefore.size());
  }

  void cancelledLeavesWhatWasWrittenAndNoSummary() {
    QTemporaryDir tmp;
    const auto root = makeDataset(fs::path(tmp.path().toStdString()) / "ds", 3);
    const auto plan = evaluate::planEvaluation(dataset::openDataset(root.string()), evaluate::CaseSet::All, 0.2, tmp.path().toStdString() + "/p");
    FromTruth p;
    p.mode = "exact";
    p.cancelAt = 1;
    QVERIFY_THROWS_EXCEPTION(Cancelled, evaluate::evaluateDataset(plan, [&p](const Volume& v) { return p(v); }, false, {}, &p));
    QVERIFY(fs::exists(plan.files[0].prediction));
    QVERIFY(!fs::exists(plan.files[1].prediction));
    QVERIFY(!fs::exists(fs::path(plan.outDir) / "summary.json"));
  }

  // summary.json read back (Evaluate dataset's Open results…): the same cases, metrics (an infinite
  // HD95 too), failures and per-label summary as the run that wrote it.
  void readsBackWhatItWrote() {
    QTemporaryDir tmp;
    const auto root = makeDataset(fs::path(tmp.path().toStdString()) / "ds", 3);
    const auto ds = dataset::openDataset(root.string());
    writeText(ds.cases[1].images[0], "not a NIfTI file");
    const auto plan = evaluate::planEvaluation(ds, evaluate::CaseSet::All, 0.2, tmp.path().toStdString() + "/p");
    FromTruth p;
    p.mode = "empty";  // every HD95 infinite
    // Each case's peaks as a caller measures them (one per case, a CUDA device past 4 GiB).
    const auto peaksOf = [](const Volume& v) {
      return evaluate::DevicePeaks{{"cpu", v.voxelCount() * 4}, {"r1:cuda:0", (std::int64_t{5} << 30) + v.size()[0]}};
    };
    const auto plannedOf = [](const Volume& v) { return evaluate::DevicePeaks{{"cpu", v.voxelCount() * 5}}; };
    const auto s = evaluate::evaluateDataset(
        plan, [&](const Volume& v) { return evaluate::Predicted(p(v), peaksOf(v), plannedOf(v)); }, false, {}, &p);
    QCOMPARE(s.cases[0].peakBytes, peaksOf(io::readVolume(ds.cases[0].images[0])));
    QCOMPARE(s.cases[0].plannedBytes, plannedOf(io::readVolume(ds.cases[0].images[0])));
    QVERIFY(s.cases[1].peakBytes.empty());  // the failed case
    const auto back = evaluate::readEvaluation(s.summaryPath);
    QCOMPARE(back.plan.dataset, std::string("Toy"));
    QCOMPARE(back.plan.outDir, plan.outDir);
    QCOMPARE(back.summary.failed, 1);
    QCOMPARE(back.summary.cases.size(), std::size_t(3));
    // Predicted cases in order, then the failed one.
    const std::vector<int> order{0, 2, 1};
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& was = s.cases[static_cast<std::size_t>(order[k])];
      const auto& got = back.summary.cases[k];
      QCOMPARE(got.files.id, was.files.id);
      QCOMPARE(got.files.prediction, was.files.prediction);
      QCOMPARE(got.error, was.error);
      QCOMPARE(got.peakBytes, was.peakBytes);
      QCOMPARE(got.plannedBytes, was.plannedBytes);
      QCOMPARE(got.metrics.size(), was.metrics.size());
      for (std::size_t m = 0; m < got.metrics.size(); ++m) {
        QCOMPARE(got.metrics[m].dice, was.metrics[m].dice);
        QVERIFY(std::isinf(got.metrics[m].hd95));
        QCOMPARE(got.metrics[m].truth, was.metrics[m].truth);
      }
    }
    QCOMPARE(back.summary.labels.size(), s.labels.size());
    for (std::size_t l = 0; l < s.labels.size(); ++l) {
      QCOMPARE(back.summary.labels[l].meanDice, s.labels[l].meanDice);
      QCOMPARE(back.summary.labels[l].infiniteHd95, s.labels[l].infiniteHd95);
    }
  }

  void refusesHostileSummaries_data() {
    QTest::addColumn<QString>("text");  // "" : a sparse file past 64 MiB
    QTest::addColumn<QString>("error");
    const QString good = R"({"dataset":"Toy","cases":"all","failed":[],"metric_per_case":[{"case":"%1","image":"/i.nii.gz",)"
                         R"("label":"/l.nii.gz","seconds":1,"mean_dice":0.5,"metrics":[{"label":%2,"dice":0.5,"hd95_mm":%3,)"
                         R"("predicted":1,"truth":1,"false_positive":0,"false_negative":0}]}]})";
    QTest::newRow("not JSON") << "{\"dataset\":" << "not valid JSON";
    QTest::newRow("a list") << "[1, 2]" << "expected an object";
    QTest::newRow("a case id with a path") << good.arg("../../etc/passwd", "1", "2.0") << "is no plain file name";
    QTest::newRow("a label as text") << good.arg("c0", "\"one\"", "2.0") << "metric_per_case[0]";
    QTest::newRow("label 0") << good.arg("c0", "0", "2.0") << "label: 0 is not a whole number in 1..65535";
    QTest::newRow("label 1e300") << good.arg("c0", "1e300", "2.0") << "is not a whole number in 1..65535";
    QTest::newRow("a distance as other text") << good.arg("c0", "1", "\"far\"") << "metric_per_case[0]";
    QTest::newRow("unknown case set") << R"({"dataset":"Toy","cases":"most","metric_per_case":[]})" << "cases: cases 'most'";
    QTest::newRow("past 64 MiB") << "" << "larger than 64 MiB";
    const QString memory = R"({"dataset":"Toy","cases":"all","metric_per_case":[{"case":"c0","image":"/i.nii.gz","label":"",)"
                           R"("seconds":1,"mean_dice":1,"metrics":[],"memory":%1}]})";
    QTest::newRow("memory as a list") << memory.arg("[1]") << "memory: expected measured and planned";
    QTest::newRow("planned as a list") << memory.arg(R"({"planned":[1]})") << "memory planned: expected at most 64 devices";
    QTest::newRow("negative bytes") << memory.arg(R"({"measured":{"cpu":-1}})") << "memory measured cpu: -1 is not a whole number";
    QTest::newRow("bytes as a float") << memory.arg(R"({"planned":{"cpu":1e300}})") << "memory planned cpu: 1e+300 is not a whole number";
    QTest::newRow("a 65-character device") << memory.arg(QString(R"({"measured":{"%1":1}})").arg(QString(65, 'x')))
                                           << "a device name of 1 to 64 characters";
  }
  void refusesHostileSummaries() {
    QFETCH(QString, text);
    QFETCH(QString, error);
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/summary.json";
    writeText(path, text.toStdString());
    if (text.isEmpty()) fs::resize_file(path, (std::uintmax_t{64} << 20) + 1);
    std::string what;
    try {
      evaluate::readEvaluation(path);
    } catch (const FormatError& e) {
      what = e.what();
    }
    QVERIFY2(what.find(error.toStdString()) != std::string::npos && what.find("summary.json") != std::string::npos, what.c_str());
  }

  void refusesBeforeWriting_data() {
    QTest::addColumn<QString>("out");   // relative to the temporary folder
    QTest::addColumn<QString>("cases");
    QTest::addColumn<int>("count");     // cases in the dataset
    QTest::addColumn<QString>("error");
    QTest::newRow("over the dataset's labels") << "ds/labelsTr" << "all" << 2 << "would overwrite the dataset's own";
    QTest::newRow("over its images, through ..") << "ds/labelsTr/../imagesTr" << "all" << 2 << "would overwrite";
    QTest::newRow("a file") << "ds/dataset.json" << "all" << 2 << "is a file";
    QTest::newRow("no folder") << "" << "all" << 2 << "no folder given";
    QTest::newRow("a split with no validation case") << "p" << "validation" << 1 << "leaves none there";
    QTest::newRow("unknown set") << "p" << "tests" << 2 << "expected all, validation or training";
  }
  void refusesBeforeWriting() {
    QFETCH(QString, out);
    QFETCH(QString, cases);
    QFETCH(int, count);
    QFETCH(QString, error);
    QTemporaryDir tmp;
    const fs::path base = tmp.path().toStdString();
    const auto root = makeDataset(base / "ds", count);
    const auto ds = dataset::openDataset(root.string());
    std::string what;
    try {
      evaluate::planEvaluation(ds, evaluate::caseSetFromString(cases.toStdString()), 0.2, out.isEmpty() ? "" : (base / out.toStdString()).string());
    } catch (const Error& e) {
      what = e.what();
    }
    QVERIFY2(what.find(error.toStdString()) != std::string::npos, what.c_str());
    QVERIFY(!fs::exists(base / "p"));
  }
};

QTEST_GUILESS_MAIN(DatasetEvaluationTest)
#include "DatasetEvaluationTest.moc"
