// One run description for the workstation and the CLI: the panels edit the same run, a session
// saved by the GUI is the run `splitseg-cli train --session` reads (byte for byte) and the GUI
// opens again, and a checkpoint trained in the GUI predicts through `splitseg-cli infer` exactly
// what the review shows.
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "core/engine/Trainer.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/placement/PlacementView.h"
#include "ui/placement/StageMemoryModel.h"
#include "ui/review/ReviewPanel.h"
#include "ui/session/Session.h"
#include "ui/training/RunSettingsDialog.h"
#include "ui/training/TrainingPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>

#include <cmath>

using namespace splitseg;
using namespace splitseg::ui;

namespace {
struct CliResult {
  int code;
  QString out, err;
};
CliResult cli(const QStringList& args) {
  QProcess p;
  p.start(SPLITSEG_CLI, args);
  p.waitForFinished(300000);
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}
} // namespace

class RunDescriptionTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString image_, label_;

  // A run with every part set away from its default, as a user would leave it.
  static run::RunSpec edited(run::RunSpec r, const QString& checkpoint) {
    r.patch = {32, 32, 32};
    r.batch = 2;
    r.precision = placement::StagePrecisions::parse("bf16:dec0");
    r.recompute = {"enc0"};
    r.steps = 3;
    r.learningRate = 2e-3;
    r.seed = 11;
    r.validateEvery = 0;
    r.checkpointEvery = 2;
    r.cpuBudgetBytes = std::int64_t(3) << 30;
    r.preprocessing.intensity = intensityPreset("ct-bone");
    r.window = {32, 32, 32};
    r.overlap = 0.25;
    r.checkpoint = checkpoint.toStdString();
    return r;
  }

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    QVERIFY(dir_.isValid());
    data::PhantomOptions o;
    o.size = {48, 40, 32};
    o.spacing = {0.9, 0.9, 1.5};
    o.seed = 5;
    const auto p = data::makePhantom(o);
    image_ = dir_.path() + "/image.nii.gz";
    label_ = dir_.path() + "/label.nii.gz";
    io::writeVolume(p.image, image_.toStdString());
    io::writeVolume(p.label, label_.toStdString());
  }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void panelsEditTheSameRun() {
    MainWindow w;
    w.resize(900, 600);
    w.session()->createUNet(4, 3);
    auto* view = w.placementView();
    auto* panel = w.trainingPanel();
    view->patchBox()->setValue(96);
    QCOMPARE(panel->patchBox()->value(), 96);  // the training panel is never stale
    QCOMPARE(w.session()->run().patch, (std::array<std::int64_t, 3>{96, 96, 96}));
    panel->batchBox()->setValue(3);
    QCOMPARE(view->batchBox()->value(), 3);
    QCOMPARE(w.session()->run().batch, 3);
    panel->intensityBox()->setCurrentText("ct-lung");
    QCOMPARE(w.session()->run().preprocessing.intensity.preset, std::string("ct-lung"));
    // The planner plans what training trains.
    const auto req = StageMemoryModel::request(*w.session());
    QCOMPARE(req.size, (std::array<std::int64_t, 3>{96, 96, 96}));
    QCOMPARE(req.batch, 3);
  }

  // Review's window, overlap, mirroring and post-processing are the run's: edits there land in the
  // run, and a run set elsewhere (All settings, a session, the CLI's JSON) shows there, including
  // what the controls cannot make (a non-cubic window, mirroring along z only), untouched.
  void reviewEditsTheSameRun() {
    MainWindow w;
    w.resize(900, 600);
    w.session()->createUNet(4, 3);
    auto* review = w.reviewPanel();
    auto* overlap = review->findChild<QDoubleSpinBox*>("reviewOverlap");
    auto* mirror = review->findChild<QComboBox*>("reviewMirror");
    auto* keep = review->findChild<QCheckBox*>("reviewKeepLargest");
    QVERIFY(overlap && mirror && keep);
    const auto window = [&] { return w.session()->run().window; };
    QCOMPARE(window(), (std::array<std::int64_t, 3>{96, 96, 96}));  // the workstation's starting run
    QCOMPARE(review->windowBox()->value(), 96);
    review->windowBox()->setValue(48);
    QCOMPARE(window(), (std::array<std::int64_t, 3>{48, 48, 48}));
    review->modeBox()->setCurrentIndex(review->modeBox()->findData("whole"));
    QCOMPARE(window(), (std::array<std::int64_t, 3>{0, 0, 0}));
    QVERIFY(!review->windowBox()->isEnabled());
    overlap->setValue(0.25);
    QCOMPARE(w.session()->run().overlap, 0.25);
    mirror->setCurrentIndex(mirror->findData("xyz"));
    QCOMPARE(w.session()->run().mirror, (std::array<bool, 3>{true, true, true}));
    keep->setChecked(true);
    QVERIFY(w.session()->run().keepLargest);

    run::RunSpec r = w.session()->run();
    r.window = {64, 64, 32};
    r.overlap = 0.375;
    r.mirror = {false, false, true};
    r.keepLargest = false;
    w.session()->setRun(r);
    QCOMPARE(review->modeBox()->currentData().toString(), QString("window"));
    QVERIFY(review->windowBox()->isEnabled());
    QCOMPARE(review->windowBox()->value(), 64);
    QVERIFY2(review->windowBox()->toolTip().contains("64×64×32"), qPrintable(review->windowBox()->toolTip()));
    QCOMPARE(overlap->value(), 0.375);
    QCOMPARE(mirror->currentData().toString(), QString("z"));
    QVERIFY(!keep->isChecked());
    QVERIFY(w.session()->run() == r);  // shown, not rewritten
    review->windowBox()->setValue(80);
    QCOMPARE(window(), (std::array<std::int64_t, 3>{80, 80, 80}));
    QVERIFY(review->windowBox()->toolTip().isEmpty());
    // Past the box's range: shown at its maximum, said in the tooltip, the run untouched.
    r = w.session()->run();
    r.window = {640, 640, 640};
    w.session()->setRun(r);
    QCOMPARE(review->windowBox()->value(), review->windowBox()->maximum());
    QVERIFY2(review->windowBox()->toolTip().contains("640×640×640"), qPrintable(review->windowBox()->toolTip()));
    QCOMPARE(window(), (std::array<std::int64_t, 3>{640, 640, 640}));
    QCOMPARE(w.session()->run().mirror, (std::array<bool, 3>{false, false, true}));
  }

  // "All settings…": the whole run in one form. Opening and applying it unchanged leaves the run
  // byte for byte; typed edits land in the session's run (and so in the panels); bad fields are
  // refused with their names and change nothing.
  void allSettingsEditTheWholeRun() {
    MainWindow w;
    w.resize(900, 600);
    w.session()->createUNet(4, 3);
    run::RunSpec start = edited(w.session()->run(), dir_.path() + "/all.ckpt");
    start.recompute = {"enc0"};
    w.session()->setRun(start);
    const std::string before = w.session()->run().toJson().dump();
    {
      RunSettingsDialog dialog(w.session(), &w);
      QVERIFY2(dialog.apply(), qPrintable(dialog.problems().join('\n')));
      QCOMPARE(w.session()->run().toJson().dump(), before);
    }
    RunSettingsDialog dialog(w.session(), &w);
    dialog.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dialog));
    auto type = [&](const char* name, const QString& text) {
      auto* e = dialog.findChild<QLineEdit*>(name);
      QVERIFY2(e, name);
      e->setFocus();
      e->selectAll();
      QTest::keyClick(e, Qt::Key_Backspace);
      QTest::keyClicks(e, text);
    };
    // Bad input: every problem named, nothing applied.
    type("recomputeText", "enc0,dec9");
    type("seedText", "-3");
    type("cpuBudgetText", "lots");
    QVERIFY(!dialog.apply());
    const QString problems = dialog.problems().join('\n');
    for (const char* field : {"recompute", "seed", "cpu_budget"})
      QVERIFY2(problems.contains(QString(field) + ":"), qPrintable(problems));
    QCOMPARE(w.session()->run().toJson().dump(), before);
    QVERIFY(dialog.findChild<QLabel*>("runProblems")->isVisible());
    // Good input, from the keyboard and the mouse.
    type("recomputeText", "enc0,dec0");
    type("seedText", "42");
    type("cpuBudgetText", "2GiB");
    auto* offload = dialog.findChild<QCheckBox*>("offloadBox");
    QTest::mouseClick(offload, Qt::LeftButton, {}, QPoint(8, offload->height() / 2));
    auto* schedule = dialog.findChild<QComboBox*>("lrSchedule");
    QVERIFY(schedule);
    QCOMPARE(schedule->currentData().toString(), QString("constant"));
    schedule->setCurrentIndex(schedule->findData("poly"));
    for (const char* axis : {"mirrorx", "mirrorz"}) {
      auto* box = dialog.findChild<QCheckBox*>(axis);
      QVERIFY(box && !box->isChecked());
      QTest::mouseClick(box, Qt::LeftButton, {}, QPoint(8, box->height() / 2));
    }
    auto* keepLargest = dialog.findChild<QCheckBox*>("keepLargest");
    QTest::mouseClick(keepLargest, Qt::LeftButton, {}, QPoint(8, keepLargest->height() / 2));
    QVERIFY2(dialog.apply(), qPrintable(dialog.problems().join('\n')));
    const auto& now = w.session()->run();
    QCOMPARE(now.recompute, (std::set<std::string>{"dec0", "enc0"}));
    QCOMPARE(now.seed, std::uint64_t{42});
    QCOMPARE(now.cpuBudgetBytes, std::int64_t{2} << 30);
    QCOMPARE(now.offload, !start.offload);
    QVERIFY(now.lrSchedule == run::LrSchedule::Poly);
    QCOMPARE(run::mirrorToString(now.mirror), std::string("xz"));
    QVERIFY(now.keepLargest);
    QCOMPARE(now.batch, start.batch);  // untouched fields stay
    QVERIFY(!dialog.findChild<QLabel*>("runProblems")->isVisible());
  }

  void sessionIsTheCliRunByteForByte() {
    const QString path = dir_.path() + "/gui.splitseg";
    std::string expected;
    {
      MainWindow a;
      a.resize(900, 600);
      QVERIFY(a.openVolume(image_, label_));
      a.session()->createUNet(4, 3);
      a.session()->setRun(edited(a.session()->run(), dir_.path() + "/gui.pt"));
      a.placementView()->moveStages({"dec0", "head"}, "cpu");
      expected = a.session()->run().toJson().dump(2);
      QVERIFY(a.saveSessionFile(path));
    }
    // The CLI reads the same run (paths resolved against the session's folder).
    const auto r = cli({"train", "--session", path, "--print-run"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(r.out.trimmed().toStdString(), expected);
    // A typed flag overlays only its own field.
    const auto steps = cli({"train", "--session", path, "--steps", "7", "--print-run"});
    QVERIFY2(steps.code == 0, qPrintable(steps.err));
    auto overlaid = run::RunSpec::fromText(steps.out.toStdString());
    QCOMPARE(overlaid.steps, std::int64_t{7});
    overlaid.steps = 3;
    QCOMPARE(overlaid.toJson().dump(2), expected);
    // And the GUI opens it to the same run.
    MainWindow b;
    b.resize(900, 600);
    const QStringList warnings = b.openSessionFile(path);
    // The run names a checkpoint training has not written yet: that is the only remark.
    QCOMPARE(warnings.size(), 1);
    QVERIFY2(warnings.front().contains("gui.pt"), qPrintable(warnings.front()));
    test::warnings().clear();  // the status bar showed it on purpose
    QCOMPARE(b.session()->run().toJson().dump(2), expected);
  }

  void guiCheckpointInfersLikeTheReview() {
    MainWindow w;
    w.resize(900, 600);
    QVERIFY(w.openVolume(image_, label_));
    torch::manual_seed(4);
    w.session()->createNetwork("unet3d", {{"base_channels", 4}, {"depth", 3}, {"norm", "instance"}});
    const QString checkpoint = dir_.path() + "/trained.pt";
    auto run = w.session()->run();
    run.patch = {16, 16, 16};
    run.batch = 2;
    run.steps = 30;
    run.learningRate = 1e-2;
    run.validateEvery = 0;
    run.checkpoint = checkpoint.toStdString();
    // Phantom intensities are not Hounsfield units: the per-image z-score suits them.
    run.preprocessing.intensity = intensityPreset("mr-zscore");
    run.data.kind = run::DataKind::Volume;
    w.session()->setRun(run);
    QSignalSpy finished(w.trainingPanel(), &TrainingPanel::runFinished);
    QTest::mouseClick(w.trainingPanel()->startButton(), Qt::LeftButton);
    QVERIFY(finished.wait(180000));
    QCOMPARE(finished.front().at(1).toString(), QString());
    // The GUI's checkpoint carries the GUI's run: network, preprocessing, precision, data.
    const auto info = engine::readCheckpointInfo(checkpoint.toStdString());
    QCOMPARE(info.step, std::int64_t{30});
    QCOMPARE(info.run.preprocessing.toJson(), w.session()->run().preprocessing.toJson());
    QCOMPARE(info.run.data.image, image_.toStdString());
    QCOMPARE(info.run.networkOptions.dump(), w.session()->run().networkOptions.dump());

    // Review: the whole volume through the session's network and run.
    w.reviewPanel()->modeBox()->setCurrentIndex(w.reviewPanel()->modeBox()->findData("whole"));
    QSignalSpy reviewed(w.reviewPanel(), &ReviewPanel::inferenceFinished);
    QTest::mouseClick(w.reviewPanel()->runButton(), Qt::LeftButton);
    QVERIFY(reviewed.wait(120000));
    QVERIFY(reviewed.front().at(0).toBool());
    const auto review = w.session()->prediction();
    QVERIFY(review);

    // The CLI, given only the checkpoint and the image, rebuilds the same preprocessing.
    const QString out = dir_.path() + "/cli-seg.nii.gz";
    const auto r = cli({"infer", "--checkpoint", checkpoint, "--image", image_, "--out", out, "--progress", "none"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const Volume cliSeg = io::readVolume(out.toStdString());
    QVERIFY(cliSeg.geometry().sameGrid(review->geometry()));
    double maxDiff = 0;
    std::int64_t foreground = 0;
    for (std::size_t i = 0; i < cliSeg.voxels().size(); ++i) {
      maxDiff = std::max(maxDiff, double(std::fabs(cliSeg.voxels()[i] - review->voxels()[i])));
      foreground += review->voxels()[i] > 0.5f;
    }
    QVERIFY2(maxDiff <= 1e-6, qPrintable(QString("max abs diff %1").arg(maxDiff)));
    // A trained segmentation, neither empty nor everything: the agreement means something.
    QVERIFY2(foreground > 0 && foreground < std::int64_t(cliSeg.voxels().size()),
             qPrintable(QString("%1 foreground voxels").arg(foreground)));
    qInfo("review and CLI agree on %zu voxels (%lld foreground)", cliSeg.voxels().size(), static_cast<long long>(foreground));
  }
};

QTEST_MAIN(RunDescriptionTest)
#include "RunDescriptionTest.moc"
