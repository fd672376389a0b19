// .splitseg sessions: every field survives save + load, paths are stored relative to the
// session's folder and come back absolute, and missing files are reported while the rest loads.
#include "core/base/Error.h"
#include "core/session/Session.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace splitseg;
namespace fs = std::filesystem;

class TestSession : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void roundTripKeepsEverything() {
    QTemporaryDir tmp;
    const fs::path root = tmp.path().toStdString();
    fs::create_directories(root / "data" / "ds");
    std::ofstream(root / "data" / "ct.nii.gz") << "x";
    std::ofstream(root / "data" / "ct_label.nii.gz") << "x";
    std::ofstream(root / "model.ckpt") << "x";

    session::Session s;
    s.volumes = {{(root / "data" / "ct.nii.gz").string(), "image", "CT", false},
                 {(root / "data" / "ct_label.nii.gz").string(), "label", "", false}};
    s.dataset = (root / "data" / "ds").string();
    s.architecture = "resunet3d";
    s.options = {{"base_channels", 8}, {"depth", 4}};
    s.placement = {{"stem", "cuda:0"}, {"head", "cuda:1"}};
    s.training.steps = 1234;
    s.training.epochs = 3;
    s.training.batch = 2;
    s.training.learningRate = 3e-4;
    s.training.seed = 7;
    s.training.patch = {96, 96, 64};
    s.training.precision = "bf16";
    s.training.recompute = {"stem", "head"};
    s.training.spacing = {1.5, 1.5, 2.0};
    s.training.cpuBudget = "2GiB";
    s.checkpoint = (root / "model.ckpt").string();
    s.view = {{"window", {{"level", 40}, {"width", 400}}}, {"slice", {10, 20, 30}}};

    const auto file = (root / "work.splitseg").string();
    session::saveSession(s, file);
    // Stored relative to the session's folder.
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    QCOMPARE(j["volumes"][0]["path"].get<std::string>(), std::string("data/ct.nii.gz"));
    QCOMPARE(j["checkpoint"].get<std::string>(), std::string("model.ckpt"));

    const auto r = session::loadSession(file);
    QVERIFY(r.warnings.empty());
    const auto& t = r.session;
    QCOMPARE(t.volumes.size(), std::size_t{2});
    QCOMPARE(t.volumes[0].path, s.volumes[0].path);
    QCOMPARE(t.volumes[0].name, std::string("CT"));
    QCOMPARE(t.volumes[1].role, std::string("label"));
    QCOMPARE(t.dataset, s.dataset);
    QCOMPARE(t.architecture, s.architecture);
    QCOMPARE(t.options, s.options);
    QCOMPARE(t.placement, s.placement);
    QCOMPARE(t.training.steps, s.training.steps);
    QCOMPARE(t.training.epochs, 3);
    QCOMPARE(t.training.batch, 2);
    QCOMPARE(t.training.learningRate, 3e-4);
    QCOMPARE(t.training.seed, std::uint64_t{7});
    QCOMPARE(t.training.patch, s.training.patch);
    QCOMPARE(t.training.precision, std::string("bf16"));
    QCOMPARE(t.training.recompute, s.training.recompute);
    QCOMPARE(t.training.spacing, s.training.spacing);
    QCOMPARE(t.training.cpuBudget, std::string("2GiB"));
    QCOMPARE(t.checkpoint, s.checkpoint);
    QCOMPARE(t.view, s.view);

    // The project folder moves as a whole: the session still finds its files.
    const fs::path moved = root.string() + "-moved";
    fs::rename(root, moved);
    const auto m = session::loadSession((moved / "work.splitseg").string());
    QVERIFY(m.warnings.empty());
    QCOMPARE(m.session.volumes[0].path, (moved / "data" / "ct.nii.gz").string());
    fs::rename(moved, root);
  }

  void missingFilesAreReportedAndTheRestLoads() {
    QTemporaryDir tmp;
    const fs::path root = tmp.path().toStdString();
    std::ofstream(root / "s.splitseg") << R"({"splitseg_session":1,
      "volumes":[{"path":"gone.nii.gz","role":"image"}],
      "dataset":"no-such-dataset", "checkpoint":"/no/such.ckpt",
      "network":{"architecture":"unet3d","options":{"base_channels":16}},
      "training":{"steps":9}})";
    const auto r = session::loadSession((root / "s.splitseg").string());
    QCOMPARE(r.warnings.size(), std::size_t{3});
    QVERIFY(r.warnings[0].find("gone.nii.gz") != std::string::npos);
    QVERIFY(r.session.volumes[0].missing);
    QVERIFY(r.session.datasetMissing);
    QVERIFY(r.session.checkpointMissing);
    QCOMPARE(r.session.training.steps, std::int64_t{9});
    QCOMPARE(r.session.options["base_channels"].get<int>(), 16);
    QCOMPARE(r.session.training.batch, 1);  // absent keys keep their defaults
  }

  void badFilesThrowClearErrors() {
    QTemporaryDir tmp;
    const fs::path root = tmp.path().toStdString();
    QVERIFY_THROWS_EXCEPTION(IoError, session::loadSession((root / "none.splitseg").string()));
    std::ofstream(root / "bad.splitseg") << "{ not json";
    QVERIFY_THROWS_EXCEPTION(FormatError, session::loadSession((root / "bad.splitseg").string()));
    std::ofstream(root / "other.splitseg") << R"({"hello":1})";
    try {
      session::loadSession((root / "other.splitseg").string());
      QFAIL("accepted a non-session");
    } catch (const FormatError& e) {
      QVERIFY2(std::string(e.what()).find("not a SplitSeg session") != std::string::npos, e.what());
    }
    std::ofstream(root / "future.splitseg") << R"({"splitseg_session":99})";
    QVERIFY_THROWS_EXCEPTION(FormatError, session::loadSession((root / "future.splitseg").string()));
  }
};

QTEST_GUILESS_MAIN(TestSession)
#include "test_session.moc"
