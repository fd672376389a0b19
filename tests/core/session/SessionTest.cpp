// .splitseg sessions: every field survives save + load, paths are stored relative to the
// session's folder and come back absolute, and missing files are reported while the rest loads.
#include "core/base/Error.h"
#include "core/session/Session.h"
#include "core/volume/Preprocessing.h"

#include <QTemporaryDir>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

using namespace splitseg;
namespace fs = std::filesystem;

class SessionTest : public QObject {
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
    auto& run = s.run;
    run.data.kind = run::DataKind::Dataset;
    run.data.dataset = (root / "data" / "ds").string();
    run.architecture = "resunet3d";
    run.networkOptions = {{"base_channels", 8}, {"depth", 4}};
    run.placement = {{"stem", "cuda:0"}, {"head", "cuda:1"}};
    run.steps = 1234;
    run.epochs = 3;
    run.batch = 2;
    run.learningRate = 3e-4;
    run.seed = 7;
    run.patch = {96, 96, 64};
    run.precision = placement::StagePrecisions::parse("bf16");
    run.recompute = {"stem", "head"};
    run.preprocessing.targetSpacing = {1.5, 1.5, 2.0};
    run.cpuBudgetBytes = std::int64_t{2} << 30;
    run.checkpoint = (root / "model.ckpt").string();
    s.view = {{"window", {{"level", 40}, {"width", 400}}}, {"slice", {10, 20, 30}}};

    const auto file = (root / "work.splitseg").string();
    session::saveSession(s, file);
    // Stored relative to the session's folder.
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    QCOMPARE(j["volumes"][0]["path"].get<std::string>(), std::string("data/ct.nii.gz"));
    QCOMPARE(j["run"]["checkpoint"].get<std::string>(), std::string("model.ckpt"));
    QCOMPARE(j["run"]["data"]["dataset"].get<std::string>(), std::string("data/ds"));

    const auto r = session::loadSession(file);
    QVERIFY(r.warnings.empty());
    const auto& t = r.session;
    QCOMPARE(t.volumes.size(), std::size_t{2});
    QCOMPARE(t.volumes[0].path, s.volumes[0].path);
    QCOMPARE(t.volumes[0].name, std::string("CT"));
    QCOMPARE(t.volumes[1].role, std::string("label"));
    QCOMPARE(t.run.data.dataset, run.data.dataset);
    QCOMPARE(t.run.architecture, run.architecture);
    QCOMPARE(t.run.networkOptions, run.networkOptions);
    QCOMPARE(t.run.placement, run.placement);
    QCOMPARE(t.run.steps, run.steps);
    QCOMPARE(t.run.epochs, 3);
    QCOMPARE(t.run.batch, 2);
    QCOMPARE(t.run.learningRate, 3e-4);
    QCOMPARE(t.run.seed, std::uint64_t{7});
    QCOMPARE(t.run.patch, run.patch);
    QCOMPARE(t.run.precision.toString(), std::string("bf16"));
    QCOMPARE(t.run.recompute, run.recompute);
    QCOMPARE(t.run.preprocessing.targetSpacing, run.preprocessing.targetSpacing);
    QCOMPARE(t.run.cpuBudgetBytes, std::int64_t{2} << 30);
    QCOMPARE(t.run.checkpoint, run.checkpoint);
    QCOMPARE(t.view, s.view);
    // The whole run, not only the fields above, comes back as it was.
    QCOMPARE(t.run.toJson().dump(), run.toJson().dump());

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
    std::ofstream(root / "s.splitseg") << R"({"splitseg_session":2,
      "volumes":[{"path":"gone.nii.gz","role":"image"}],
      "run":{"splitseg_run":1,
        "data":{"source":"dataset","dataset":"no-such-dataset"}, "checkpoint":"no-such.ckpt",
        "network":{"architecture":"unet3d","options":{"base_channels":16}},
        "schedule":{"steps":9}}})";
    const auto r = session::loadSession((root / "s.splitseg").string());
    QCOMPARE(r.warnings.size(), std::size_t{3});
    QVERIFY(r.warnings[0].find("gone.nii.gz") != std::string::npos);
    QVERIFY(r.session.volumes[0].missing);
    QVERIFY(r.session.datasetMissing);
    QVERIFY(r.session.checkpointMissing);
    QCOMPARE(r.session.run.steps, std::int64_t{9});
    QCOMPARE(r.session.run.networkOptions["base_channels"].get<int>(), 16);
    QCOMPARE(r.session.run.batch, 1);  // absent keys keep their defaults
  }

  // A shared session cannot choose where training writes: a checkpoint outside its folder is
  // dropped with a warning; one inside is kept.
  void checkpointOutsideTheFolderIsNotUsed_data() {
    QTest::addColumn<QString>("checkpoint");
    QTest::addColumn<bool>("kept");
    QTest::newRow("inside") << "runs/a.pt" << true;
    QTest::newRow("parent") << "../evil.pt" << false;
    QTest::newRow("climbs out") << "runs/../../evil.pt" << false;
    QTest::newRow("absolute elsewhere") << "/tmp/splitseg-elsewhere/evil.pt" << false;
  }
  void checkpointOutsideTheFolderIsNotUsed() {
    QFETCH(QString, checkpoint);
    QFETCH(bool, kept);
    QTemporaryDir tmp;
    const fs::path root = fs::path(tmp.path().toStdString()) / "shared";
    fs::create_directories(root);
    const nlohmann::json session{{"splitseg_session", 2},
                                 {"run", {{"splitseg_run", 1}, {"checkpoint", checkpoint.toStdString()}}}};
    std::ofstream(root / "s.splitseg") << session.dump();
    const auto r = session::loadSession((root / "s.splitseg").string());
    QCOMPARE(!r.session.run.checkpoint.empty(), kept);
    bool warned = false;
    for (const auto& w : r.warnings) warned |= w.find("outside the session's folder") != std::string::npos;
    QCOMPARE(warned, !kept);
  }

  // A session written before the run description (version 1: loose network, placement and
  // training keys) still opens, its settings in the run.
  void version1SessionLoadsIntoTheRun() {
    QTemporaryDir tmp;
    const fs::path root = tmp.path().toStdString();
    fs::create_directories(root / "ds");
    std::ofstream(root / "old.splitseg") << R"({"splitseg_session":1,
      "volumes":[], "dataset":"ds", "checkpoint":"m.ckpt",
      "network":{"architecture":"unet3d","options":{"base_channels":8,"depth":3}},
      "placement":{"stages":{"enc0":"cpu","head":"cpu"}},
      "training":{"steps":77,"epochs":2,"steps_per_epoch":5,"batch":3,"lr":0.0005,"seed":11,
                  "patch":[96,80,64],"precision":"bf16:enc0","recompute":["enc0","dec0"],
                  "intensity":"ct-bone","spacing":[1.0,1.0,2.5],"validate_every":4,
                  "checkpoint_every":6,"cpu_budget":"1GiB"},
      "view":{"slice":[1,2,3]}})";
    const auto r = session::loadSession((root / "old.splitseg").string());
    const auto& run = r.session.run;
    QCOMPARE(run.architecture, std::string("unet3d"));
    QCOMPARE(run.networkOptions["depth"].get<int>(), 3);
    QCOMPARE(run.placement.at("enc0"), std::string("cpu"));
    QCOMPARE(run.placement.size(), std::size_t{2});
    QCOMPARE(run.steps, std::int64_t{77});
    QCOMPARE(run.epochs, 2);
    QCOMPARE(run.stepsPerEpoch, std::int64_t{5});
    QCOMPARE(run.batch, 3);
    QCOMPARE(run.learningRate, 0.0005);
    QCOMPARE(run.seed, std::uint64_t{11});
    QVERIFY((run.patch == std::array<std::int64_t, 3>{96, 80, 64}));
    QCOMPARE(run.precision.toString(), std::string("bf16:enc0"));
    QVERIFY((run.recompute == std::set<std::string>{"enc0", "dec0"}));
    QCOMPARE(run.preprocessing.intensity.preset, std::string("ct-bone"));
    QCOMPARE(run.preprocessing.intensity.low, intensityPreset("ct-bone").low);
    QCOMPARE(run.preprocessing.intensity.high, intensityPreset("ct-bone").high);
    QVERIFY((run.preprocessing.targetSpacing == std::array<double, 3>{1.0, 1.0, 2.5}));
    QCOMPARE(run.validateEvery, std::int64_t{4});
    QCOMPARE(run.checkpointEvery, std::int64_t{6});
    QCOMPARE(run.cpuBudgetBytes, std::int64_t{1} << 30);
    QVERIFY(run.data.kind == run::DataKind::Dataset);
    QCOMPARE(run.data.dataset, (root / "ds").string());
    QCOMPARE(run.checkpoint, (root / "m.ckpt").string());
    QCOMPARE(r.session.view["slice"][2].get<int>(), 3);
    // Saved again, it is a version-2 session with the same run.
    session::saveSession(r.session, (root / "new.splitseg").string());
    const auto again = session::loadSession((root / "new.splitseg").string());
    QCOMPARE(again.session.run.toJson().dump(), run.toJson().dump());
  }

  void unknownKeysAreRefusedByName_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("field");
    QTest::newRow("top level") << R"({"splitseg_session":2,"volumez":[]})" << "volumez";
    QTest::newRow("in the run") << R"({"splitseg_session":2,"run":{"splitseg_run":1,"stepz":3}})" << "run.stepz";
    QTest::newRow("nested in the run")
        << R"({"splitseg_session":2,"run":{"splitseg_run":1,"schedule":{"stepz":3}}})" << "run.schedule.stepz";
    QTest::newRow("wrong type in the run")
        << R"({"splitseg_session":2,"run":{"splitseg_run":1,"learning_rate":"fast"}})" << "run.learning_rate";
  }
  void unknownKeysAreRefusedByName() {
    QFETCH(QString, text);
    QFETCH(QString, field);
    QTemporaryDir tmp;
    const auto file = (fs::path(tmp.path().toStdString()) / "s.splitseg").string();
    std::ofstream(file) << text.toStdString();
    try {
      session::loadSession(file);
      QFAIL("accepted a bad session");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains(field), e.what());
      QVERIFY2(!QString(e.what()).contains('\n'), e.what());
    }
  }

  // Issue 50: a 400 KB session whose "view" nests 200,000 arrays overflowed the stack when the
  // view was copied. It is refused by depth in one line naming the file; the session object and
  // the arrays in its view count together, and 64 levels in all still load.
  // A file name that is not UTF-8 cannot go into JSON: saving refuses it by name, and the file
  // already there stays as it was.
  void nonUtf8PathIsRefusedOnSave() {
    QTemporaryDir tmp;
    const std::filesystem::path root = tmp.path().toStdString();
    const auto file = (root / "work.splitseg").string();
    session::Session s;
    s.volumes.push_back({(root / "ct.nii.gz").string(), "image", "", false});
    session::saveSession(s, file);
    std::ifstream before(file);
    const std::string kept((std::istreambuf_iterator<char>(before)), std::istreambuf_iterator<char>());
    s.volumes.push_back({(root / "scan\xff.nii.gz").string(), "image", "", false});
    try {
      session::saveSession(s, file);
      QFAIL("a path that is not UTF-8 was saved");
    } catch (const InvalidArgument& e) {
      QCOMPARE(QString(e.what()), QString("volume path scan\\xff.nii.gz is not UTF-8 text, which a session file cannot "
                                          "hold; rename it and add it again"));
    }
    std::ifstream after(file);
    QCOMPARE(std::string((std::istreambuf_iterator<char>(after)), std::istreambuf_iterator<char>()), kept);
    QVERIFY(session::toJson(s, "", true).dump().find("scan\\\\xff.nii.gz") != std::string::npos);
  }

  void deepSessionIsRefused_data() {
    QTest::addColumn<int>("viewDepth");  // arrays nested in "view"; the session object is one level more
    QTest::addColumn<bool>("loads");
    QTest::newRow("63 in the view: 64 levels") << 63 << true;
    QTest::newRow("64 in the view: 65 levels") << 64 << false;
    QTest::newRow("200,000 in the view") << 200000 << false;
  }
  void deepSessionIsRefused() {
    QFETCH(int, viewDepth);
    QFETCH(bool, loads);
    QTemporaryDir tmp;
    const auto file = (fs::path(tmp.path().toStdString()) / "deep.splitseg").string();
    const std::string view = std::string(static_cast<std::size_t>(viewDepth), '[') + std::string(static_cast<std::size_t>(viewDepth), ']');
    std::ofstream(file) << R"({"splitseg_session":2,"volumes":[],"run":{"splitseg_run":1},"view":)" << view << "}";
    if (viewDepth == 200000) QVERIFY(fs::file_size(file) > 400000);
    try {
      const auto r = session::loadSession(file);
      QVERIFY2(loads, "accepted a session nested too deep");
      int depth = 0;  // the view came back whole
      for (const nlohmann::json* v = &r.session.view; v->is_array(); v = &v->front()) {
        ++depth;
        if (v->empty()) break;
      }
      QCOMPARE(depth, viewDepth);
    } catch (const FormatError& e) {
      QVERIFY2(!loads, e.what());
      QCOMPARE(QString::fromStdString(e.what()),
               QString::fromStdString(file + ": session nests JSON arrays and objects deeper than 64 levels; refused"));
      QCOMPARE(QString::fromStdString(e.path()), QString::fromStdString(file));
    }
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

QTEST_GUILESS_MAIN(SessionTest)
#include "SessionTest.moc"
