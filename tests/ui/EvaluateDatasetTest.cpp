// Review > Evaluate dataset… on a phantom dataset: every case predicted through the real engine,
// written, and scored; the Dice the table shows is computed again here from the files written
// and the ground truth; a case opened from the table shows the file written, and Review's own
// prediction of that case gives the same labels; over two local ranks the same files come out;
// a corrupted case fails alone; a folder over the dataset's labels is refused with nothing
// written; Cancel leaves no summary.
#include "tests/ui/UiTestSupport.h"
#include "tests/support/PhantomDataset.h"

#include "core/data/Phantom.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/model/StagedNetwork.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/review/DatasetEvaluationDialog.h"
#include "ui/review/ReviewPanel.h"
#include "ui/session/RankHost.h"
#include "ui/session/Session.h"
#include "ui/training/RankProcesses.h"
#include "ui/training/TrainingPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCryptographicHash>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;
using namespace splitseg;
using namespace splitseg::ui;

namespace {
// MSD layout: `n` one-label phantoms; `corrupt`: that case's image is no NIfTI.
QString makeDataset(const QString& dir, int n, int corrupt = -1) {
  checks::PhantomDatasetOptions o;
  o.cases = n;
  o.firstSeed = 30;
  o.labelPixelType = "uint8";
  o.corrupt = corrupt;
  return QString::fromStdString(checks::writePhantomDataset(fs::path(dir.toStdString()) / "Toy", o).string());
}

// Dice of label 1, counted here.
double diceOf(const Volume& p, const Volume& t) {
  std::int64_t both = 0, np = 0, nt = 0;
  for (std::size_t i = 0; i < p.voxels().size(); ++i) {
    const bool a = std::lround(p.voxels()[i]) == 1, b = std::lround(t.voxels()[i]) == 1;
    both += a && b;
    np += a;
    nt += b;
  }
  return np + nt == 0 ? 1.0 : 2.0 * static_cast<double>(both) / static_cast<double>(np + nt);
}

QByteArray sha(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}
} // namespace

class EvaluateDatasetTest : public QObject {
  Q_OBJECT

  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;

  Session* session() const { return window_->session(); }
  DatasetEvaluationDialog* dialog() const { return window_->reviewPanel()->datasetEvaluation(); }

  // Evaluates with the dialog's choices; true when it finished.
  bool evaluate(int timeoutMs = 120000) {
    QSignalSpy done(dialog(), &DatasetEvaluationDialog::evaluationFinished);
    if (!dialog()->evaluate()) return false;
    if (!done.wait(timeoutMs)) return false;
    return done.front().at(0).toBool();
  }

private Q_SLOTS:
  void initTestCase() {
    test::installWarningTrap();
    window_ = std::make_unique<MainWindow>();
    window_->resize(1400, 900);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    torch::manual_seed(11);
    session()->createUNet(4, 3);
    // Untrained, the head's biases give almost every voxel one label; without them and with larger
    // weights the features decide, so that predictions differ where they should.
    torch::NoGradGuard noGrad;
    for (auto& p : session()->network()->root().named_parameters())
      if (p.key().rfind("head", 0) == 0) {
        if (p.key().find("bias") != std::string::npos) p.value().zero_();
        else p.value().mul_(40);
      }
    auto run = session()->run();
    run.window = {16, 16, 16};
    run.overlap = 0.25;
    session()->setRun(run);
  }
  void cleanupTestCase() { window_.reset(); }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void buttonFollowsTheDataset() {
    QVERIFY(!window_->reviewPanel()->evaluateDatasetButton()->isEnabled());
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath("first"), 4)));
    QVERIFY(window_->reviewPanel()->evaluateDatasetButton()->isEnabled());
  }

  // The folder a person chose stays while the run changes; another dataset gets its own default.
  void outputFolderFollowsTheDataset() {
    auto* d = dialog();
    d->show();
    QVERIFY(QTest::qWaitForWindowExposed(d));
    QCOMPARE(d->outputEdit()->text(), QDir(session()->datasetFolder()).filePath("splitseg_predictions"));
    d->outputEdit()->setText(tmp_.filePath("chosen"));
    auto run = session()->run();
    run.overlap = 0.5;
    session()->setRun(run);
    QCOMPARE(d->outputEdit()->text(), tmp_.filePath("chosen"));
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath("second"), 2)));
    QCOMPARE(d->outputEdit()->text(), QDir(tmp_.filePath("second/Toy")).filePath("splitseg_predictions"));
    run.overlap = 0.25;
    session()->setRun(run);
  }

  void scoresEveryCase_data() {
    QTest::addColumn<QString>("cases");
    QTest::addColumn<int>("count");
    QTest::addColumn<int>("corrupt");
    QTest::newRow("validation split") << "validation" << 1 << -1;
    QTest::newRow("all cases") << "all" << 4 << -1;
    QTest::newRow("all cases, one corrupted") << "all" << 4 << 2;
  }
  void scoresEveryCase() {
    QFETCH(QString, cases);
    QFETCH(int, count);
    QFETCH(int, corrupt);
    const QString tag = QTest::currentDataTag();
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath(tag), 4, corrupt)));
    auto* d = dialog();
    d->show();
    QVERIFY(QTest::qWaitForWindowExposed(d));
    d->casesBox()->setCurrentIndex(d->casesBox()->findData(cases));
    const QString out = tmp_.filePath(tag + "/predictions");
    d->outputEdit()->setText(out);
    QVERIFY2(evaluate(), qPrintable(d->statusLabel()->text()));
    QCOMPARE(d->table()->rowCount(), count + 1);  // and the mean
    double sum = 0;
    int scored = 0;
    const auto& s = d->lastSummary();
    QCOMPARE(static_cast<int>(s.cases.size()), count);
    for (int row = 0; row < count; ++row) {
      const auto& c = s.cases[row];
      QCOMPARE(d->table()->item(row, 0)->text(), QString::fromStdString(c.files.id));
      const QString status = d->table()->item(row, d->table()->columnCount() - 1)->text();
      if (row == corrupt) {
        QVERIFY2(status.startsWith("failed") && !fs::exists(c.files.prediction), qPrintable(status));
        continue;
      }
      QCOMPARE(status, QString("written"));
      // The case's measured peak: the image it held at least, and the cell the largest device's.
      QVERIFY2(c.peakBytes.count("cpu") && c.peakBytes.at("cpu") > io::readVolume(c.files.image).voxelCount() * 4,
               qPrintable(QString::fromStdString(c.files.id)));
      std::int64_t top = 0;
      for (const auto& [device, bytes] : c.peakBytes) top = std::max(top, bytes);
      QCOMPARE(d->table()->horizontalHeaderItem(d->table()->columnCount() - 2)->text(), QString("Peak memory"));
      QCOMPARE(d->table()->item(row, d->table()->columnCount() - 2)->data(Qt::UserRole).toLongLong(), qlonglong(top));
      // Planned as Review plans the volume, and near it (one process: the planner's 10%).
      QVERIFY2(c.plannedBytes.count("cpu"), qPrintable(QString::fromStdString(c.files.id)));
      const double plan = double(c.plannedBytes.at("cpu")), got = double(c.peakBytes.at("cpu"));
      qInfo("%s: cpu measured %.1f KiB, planned %.1f KiB (%+.1f%%)", c.files.id.c_str(), got / 1024, plan / 1024, 100 * (got / plan - 1));
      QVERIFY2(std::abs(got / plan - 1) <= 0.10, qPrintable(QString("%1: measured %2, planned %3").arg(QString::fromStdString(c.files.id)).arg(got).arg(plan)));
      QVERIFY(d->table()->item(row, d->table()->columnCount() - 2)->toolTip().contains("planned"));
      // The file written, on the image's grid, scored here against the ground truth: the table's figure.
      const Volume written = io::readVolume(c.files.prediction), truth = io::readVolume(c.files.label);
      QVERIFY(written.geometry().sameGrid(io::readVolume(c.files.image).geometry()));
      const double dice = diceOf(written, truth);
      QCOMPARE(d->table()->item(row, 2)->text(), QString::number(dice, 'f', 4));
      QVERIFY2(dice > 0.05 && dice < 0.999, "an untrained network's Dice should be neither 0 nor 1 here");
      sum += dice;
      ++scored;
    }
    QCOMPARE(d->table()->item(count, 0)->text(), QString("mean"));
    QCOMPARE(d->table()->item(count, 1)->text(), QString::number(sum / scored, 'f', 4));
    QVERIFY(fs::exists(fs::path(out.toStdString()) / "summary.json"));
    QVERIFY2(d->summaryLabel()->text().contains(QString::number(sum / scored, 'f', 4)), qPrintable(d->summaryLabel()->text()));
    QCOMPARE(d->summaryLabel()->text().contains("1 case(s) failed"), corrupt >= 0);
    if (corrupt >= 0) {  // the dialog as a person sees it (docs/evaluate-dataset.png)
      QDir().mkpath(SPLITSEG_SCREENSHOT_DIR);
      QTest::qWait(100);  // the summary's layout
      const QImage shot = d->grab().toImage();
      QVERIFY(test::greyStdDev(shot) > 5);
      QVERIFY(shot.save(QString(SPLITSEG_SCREENSHOT_DIR) + "/evaluate-dataset.png"));
    }
    QVERIFY(!session()->busy());
  }

  // The last evaluation's first case opened from the table: the file written is what Review shows,
  // and Review's own prediction of that case gives the same labels.
  void openedCaseShowsItsPrediction() {
    auto* d = dialog();
    const auto c = d->lastSummary().cases.at(0);
    const Volume written = io::readVolume(c.files.prediction);
    QSignalSpy loaded(window_.get(), &MainWindow::volumeLoadFinished);
    const QPoint at = d->table()->visualItemRect(d->table()->item(0, 0)).center();
    QTest::mouseClick(d->table()->viewport(), Qt::LeftButton, {}, at);
    QCOMPARE(d->table()->currentRow(), 0);
    QTest::mouseDClick(d->table()->viewport(), Qt::LeftButton, {}, at);
    QVERIFY2(loaded.wait(30000), qPrintable(d->statusLabel()->text() + " | " + window_->statusText()));
    QCOMPARE(loaded.front().at(0).toString(), QString::fromStdString(c.files.image));
    QVERIFY(session()->prediction());
    QCOMPARE(session()->prediction()->voxels(), written.voxels());
    QCOMPARE(session()->groundTruthSource(), QString::fromStdString(c.files.label));
    QSignalSpy done(window_->reviewPanel(), &ReviewPanel::inferenceFinished);
    QTest::mouseClick(window_->reviewPanel()->runButton(), Qt::LeftButton);
    QVERIFY(done.wait(60000));
    QVERIFY(done.front().at(0).toBool());
    QCOMPARE(session()->prediction()->voxels(), written.voxels());
  }

  // Open results…: the last evaluation's summary.json shows the same figures for every case (the
  // failed case after the others) and the same mean row; a file that is no summary is refused with
  // the table left as it was.
  void openResultsShowsTheSameTable() {
    auto* d = dialog();
    const auto cells = [d] {
      std::map<QString, QStringList> rows;
      for (int r = 0; r < d->table()->rowCount(); ++r) {
        QStringList cols;
        for (int c = 0; c < d->table()->columnCount(); ++c)
          cols << (d->table()->item(r, c) ? d->table()->item(r, c)->text() : QString());
        rows[cols.front()] = cols;
      }
      return rows;
    };
    const auto before = cells();
    QVERIFY(before.count("mean") && before.size() == 5);  // the corrupted row's evaluation
    const QString summary = QString::fromStdString(d->lastSummary().summaryPath);
    QVERIFY(d->loadResults(summary));
    QCOMPARE(cells(), before);
    QCOMPARE(d->table()->item(3, 0)->text(), QString("case_2"));  // the failed case last
    QVERIFY2(d->summaryLabel()->text().contains("1 case(s) failed"), qPrintable(d->summaryLabel()->text()));
    const QString bad = tmp_.filePath("bad-summary.json");
    {
      QFile f(bad);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"dataset":"Toy","cases":"all","metric_per_case":[{"case":"../../x"}]})");
    }
    QVERIFY(!d->loadResults(bad));
    QVERIFY2(d->statusLabel()->text().contains("bad-summary.json"), qPrintable(d->statusLabel()->text()));
    QCOMPARE(cells(), before);
  }

  // A summary.json from someone else: its device names, case ids and error messages are shown as
  // text, never as rich text (a tag in them would be laid out, an <img> loaded).
  void namesFromOtherFilesStayText() {
    auto* d = dialog();
    const QString path = tmp_.filePath("hostile/summary.json");
    QVERIFY(QDir().mkpath(tmp_.filePath("hostile")));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"dataset":"Toy","cases":"all","failed":[{"case":"c1","error":"<img src=x>"}],"metric_per_case":[)"
              R"({"case":"c0","image":"/i.nii.gz","label":"/l.nii.gz","seconds":1,"mean_dice":0.5,"memory":{"measured":{"<b>gpu</b>":1048576}},)"
              R"("metrics":[{"label":1,"dice":0.5,"hd95_mm":2.0,"predicted":1,"truth":1,"false_positive":0,"false_negative":0}]}]})");
    }
    QVERIFY2(d->loadResults(path), qPrintable(d->statusLabel()->text()));
    QVERIFY(d->table()->item(0, d->table()->columnCount() - 2) && d->table()->item(1, d->table()->columnCount() - 1));
    const QString summary = d->summaryLabel()->text(), peak = d->table()->item(0, d->table()->columnCount() - 2)->toolTip(),
                  failed = d->table()->item(1, d->table()->columnCount() - 1)->toolTip();
    QVERIFY2(summary.contains("&lt;b&gt;gpu&lt;/b&gt;") && !summary.contains("<b>gpu"), qPrintable(summary));
    QVERIFY2(peak.contains("&lt;b&gt;gpu") && !peak.contains("<b>gpu"), qPrintable(peak));
    QVERIFY2(failed.contains("&lt;img") && !failed.contains("<img"), qPrintable(failed));
    QCOMPARE(d->statusLabel()->textFormat(), Qt::PlainText);
  }

  void overTwoLocalRanksTheSameFiles() {
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath("ranks"), 3)));
    auto* d = dialog();
    d->casesBox()->setCurrentIndex(d->casesBox()->findData("all"));
    d->outputEdit()->setText(tmp_.filePath("ranks/one"));
    QVERIFY2(evaluate(), qPrintable(d->statusLabel()->text()));
    const auto oneProcess = session()->placement();
    const auto restore = qScopeGuard([&] {
      if (session()->device("r1:cpu")) session()->removeRank(1);
      session()->setPlacement(oneProcess);
    });
    QCOMPARE(session()->addRank(RankHost{}), std::string("r1:cpu"));
    auto p = oneProcess;
    for (const auto& s : session()->stageNames())
      if (s.rfind("dec", 0) == 0) p.assign(s, "r1:cpu");
    session()->setPlacement(p);
    d->outputEdit()->setText(tmp_.filePath("ranks/two"));
    QVERIFY2(evaluate(), qPrintable(d->statusLabel()->text() + " " + d->progressBar()->format()));
    QVERIFY2(d->progressBar()->format().contains("over 2 ranks"), qPrintable(d->progressBar()->format()));
    for (const auto& c : d->lastSummary().cases) {
      const QString name = QFileInfo(QString::fromStdString(c.files.prediction)).fileName();
      QCOMPARE(io::readVolume(tmp_.filePath("ranks/two/" + name).toStdString()).voxels(),
               io::readVolume(tmp_.filePath("ranks/one/" + name).toStdString()).voxels());
    }
  }

  void refusesTheDatasetsOwnFolder() {
    const QString root = makeDataset(tmp_.filePath("refuse"), 2);
    QVERIFY(window_->openDataset(root));
    auto* d = dialog();
    d->casesBox()->setCurrentIndex(d->casesBox()->findData("all"));
    d->outputEdit()->setText(root + "/labelsTr");
    const QByteArray before = sha(root + "/labelsTr/case_0.nii.gz");
    QSignalSpy done(d, &DatasetEvaluationDialog::evaluationFinished);
    QVERIFY(!d->evaluate());
    QVERIFY2(d->statusLabel()->text().contains("would overwrite the dataset's own"), qPrintable(d->statusLabel()->text()));
    QCOMPARE(sha(root + "/labelsTr/case_0.nii.gz"), before);
    QVERIFY(!d->running() && !session()->busy());
    QTest::qWait(50);
    QCOMPARE(done.count(), 0);
  }

  void cancelLeavesNoSummary() {
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath("cancel"), 3)));
    auto* d = dialog();
    d->casesBox()->setCurrentIndex(d->casesBox()->findData("all"));
    d->outputEdit()->setText(tmp_.filePath("cancel/out"));
    QSignalSpy done(d, &DatasetEvaluationDialog::evaluationFinished);
    QVERIFY(d->evaluate());
    QVERIFY(d->cancelButton()->isEnabled() && session()->busy());
    QTest::mouseClick(d->cancelButton(), Qt::LeftButton);  // before the worker reaches its first window
    QVERIFY(done.wait(60000));
    QCOMPARE(done.front().at(0).toBool(), false);
    QVERIFY2(d->progressBar()->format().startsWith("cancelled"), qPrintable(d->progressBar()->format()));
    QVERIFY(!fs::exists(tmp_.filePath("cancel/out/summary.json").toStdString()));
    QVERIFY(!session()->busy() && window_->reviewPanel()->runButton()->isEnabled());
  }

  // Training on the dataset with "then evaluate the validation cases": the run ends with the cases
  // it held out predicted and scored in the dialog's folder (last: it changes the weights).
  void trainingEndsWithItsValidationCases() {
    const QString root = makeDataset(tmp_.filePath("train"), 4);
    QVERIFY(window_->openDataset(root));
    auto* t = window_->trainingPanel();
    t->dataBox()->setCurrentIndex(t->dataBox()->findData("dataset"));
    QVERIFY(t->evaluateAfterBox()->isEnabled());
    t->evaluateAfterBox()->setChecked(true);
    t->patchBox()->setValue(16);
    t->batchBox()->setValue(1);
    t->stepsBox()->setValue(2);
    t->validateBox()->setValue(0);
    auto* d = dialog();
    d->casesBox()->setCurrentIndex(d->casesBox()->findData("all"));  // the run must choose the validation split itself
    QSignalSpy trained(t, &TrainingPanel::runFinished);
    QSignalSpy evaluated(d, &DatasetEvaluationDialog::evaluationFinished);
    QTest::mouseClick(t->startButton(), Qt::LeftButton);
    QVERIFY(trained.wait(120000));
    QVERIFY2(trained.front().at(1).toString().isEmpty(), qPrintable(trained.front().at(1).toString()));
    QVERIFY2(evaluated.count() > 0 || evaluated.wait(120000), qPrintable(d->statusLabel()->text()));
    QVERIFY2(evaluated.front().at(0).toBool(), qPrintable(d->statusLabel()->text()));
    QVERIFY(d->isVisible());
    QCOMPARE(d->casesBox()->currentData().toString(), QString("validation"));
    QCOMPARE(static_cast<int>(d->lastSummary().cases.size()), 1);  // splitCases(4, 0.2, 0) holds one out
    QVERIFY(fs::exists((fs::path(root.toStdString()) / "splitseg_predictions" / "summary.json")));
    // Unchecked, a run ends without it.
    t->evaluateAfterBox()->setChecked(false);
    trained.clear();
    evaluated.clear();
    QTest::mouseClick(t->startButton(), Qt::LeftButton);
    QVERIFY(trained.wait(120000));
    QTest::qWait(100);
    QCOMPARE(evaluated.count(), 0);
  }

  // The run's CPU budget holds for each case as for a training step: below what a case needs,
  // every case fails alone, saying so, and nothing is written; above it, the same Dice as without.
  void cpuBudgetBoundsEachCase() {
    QVERIFY(window_->openDataset(makeDataset(tmp_.filePath("budget"), 3)));
    auto* d = dialog();
    d->show();
    QVERIFY(QTest::qWaitForWindowExposed(d));
    d->casesBox()->setCurrentIndex(d->casesBox()->findData("all"));
    d->outputEdit()->setText(tmp_.filePath("budget/free"));
    QVERIFY2(evaluate(), qPrintable(d->statusLabel()->text()));
    const auto free = d->lastSummary();
    std::int64_t smallest = 0, largest = 0;
    for (const auto& c : free.cases) {
      const std::int64_t cpu = c.peakBytes.at("cpu");
      smallest = smallest == 0 ? cpu : std::min(smallest, cpu);
      largest = std::max(largest, cpu);
    }
    const auto restore = qScopeGuard([this] {
      auto run = session()->run();
      run.cpuBudgetBytes = 0;
      session()->setRun(run);
    });
    for (const std::int64_t budget : {smallest / 2, largest + (std::int64_t{1} << 20)}) {
      auto run = session()->run();
      run.cpuBudgetBytes = budget;
      session()->setRun(run);
      const QString out = tmp_.filePath(QString("budget/%1").arg(budget));
      d->outputEdit()->setText(out);
      QVERIFY2(evaluate(), qPrintable(d->statusLabel()->text()));
      const auto& s = d->lastSummary();
      QCOMPARE(s.cases.size(), free.cases.size());
      for (std::size_t k = 0; k < s.cases.size(); ++k) {
        const auto& c = s.cases[k];
        const QString status = d->table()->item(static_cast<int>(k), d->table()->columnCount() - 1)->text();
        if (budget < smallest) {
          QVERIFY2(status.contains("out of memory on cpu") && status.contains("CPU budget"), qPrintable(status));
          QVERIFY(!fs::exists(c.files.prediction));
        } else {
          QCOMPARE(status, QString("written"));
          QCOMPARE(c.metrics.front().dice, free.cases[k].metrics.front().dice);
          QVERIFY(c.peakBytes.at("cpu") <= budget);
        }
      }
      QCOMPARE(s.failed, budget < smallest ? 3 : 0);
    }
    QVERIFY(!session()->busy());
  }
};

SPLITSEG_UI_TEST_MAIN(EvaluateDatasetTest)
#include "EvaluateDatasetTest.moc"
