// Every run edit a person makes in the placement view, the training panel, the review panel or
// All settings is one step on the session's undo stack: undo puts the run and the control that
// made the edit back, redo makes it again, and a run of spin-box steps is one step.
#include "tests/ui/UiTestSupport.h"

#include "ui/placement/PlacementView.h"
#include "ui/placement/StageCard.h"
#include "ui/review/ReviewPanel.h"
#include "ui/session/RunEditCommand.h"
#include "ui/session/Session.h"
#include "ui/training/RunSettingsDialog.h"
#include "ui/training/TrainingPanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QToolButton>
#include <QUndoStack>

#include <functional>
#include <set>

using namespace splitseg;
using namespace splitseg::ui;

class RunUndoTest : public QObject {
  Q_OBJECT

  // One kind of edit: how a person makes it, and the run's field and the control's state as text.
  struct Edit {
    std::function<void()> make;
    std::function<QString()> run;
    std::function<QString()> shown;
  };

  std::unique_ptr<Session> session_;
  std::unique_ptr<PlacementView> placement_;
  std::unique_ptr<TrainingPanel> training_;
  std::unique_ptr<ReviewPanel> review_;

  QUndoStack* stack() const { return session_->undoStack(); }
  const run::RunSpec& run() const { return session_->run(); }

  static QComboBox* precisionCombo(QWidget* w) {
    for (auto* c : w->findChildren<QComboBox*>())
      if (c->findText("bf16") >= 0) return c;
    return nullptr;
  }
  static QToolButton* cardButton(StageCard* card, const QString& text) {
    for (auto* b : card->findChildren<QToolButton*>())
      if (b->text() == text || b->objectName() == text) return b;
    return nullptr;
  }
  static std::function<QString()> value(QSpinBox* box) { return [box] { return QString::number(box->value()); }; }
  static std::function<void()> stepUp(QAbstractSpinBox* box) { return [box] { QTest::keyClick(box, Qt::Key_Up); }; }

  QSpinBox* spinBox(const QString& name) const {
    if (name == "placement patch") return placement_->patchBox();
    if (name == "placement batch") return placement_->batchBox();
    if (name == "training patch") return training_->patchBox();
    if (name == "training batch") return training_->batchBox();
    if (name == "training steps") return training_->stepsBox();
    if (name == "review window") return review_->windowBox();
    return nullptr;
  }

  Edit edit(const QString& name) {
    auto* card = placement_->card("enc0");
    const auto patch = [this] { return QString::number(run().patch[0]); };
    const auto batch = [this] { return QString::number(run().batch); };
    const auto precision = [this] { return QString::fromStdString(run().precision.toString(session_->stageNames())); };
    if (name == "stage precision") {
      auto* b = cardButton(card, "precisionToggle");
      return {[b] { QTest::mouseClick(b, Qt::LeftButton); }, precision, [b] { return b->text(); }};
    }
    if (name == "recompute") {
      auto* b = cardButton(card, "CP");
      return {[b] { QTest::mouseClick(b, Qt::LeftButton); }, [this] { return QString::number(run().recompute.count("enc0")); },
              [b] { return QString::number(b->isChecked()); }};
    }
    if (name == "offload") {
      auto* box = placement_->findChild<QCheckBox*>("hostOffload");
      return {[box] { box->click(); }, [this] { return QString::number(run().offload); },
              [box] { return QString::number(box->isChecked()); }};
    }
    if (name == "placement precision" || name == "training precision") {
      QWidget* panel = name.startsWith("placement") ? static_cast<QWidget*>(placement_.get()) : training_.get();
      auto* combo = precisionCombo(panel);
      return {[combo] { combo->setCurrentIndex(combo->findText("bf16")); }, precision, [combo] { return combo->currentText(); }};
    }
    if (name == "intensity") {
      auto* combo = training_->intensityBox();
      return {[combo] { combo->setCurrentIndex(combo->findText("ct-bone")); },
              [this] { return QString::fromStdString(run().preprocessing.intensity.preset); }, [combo] { return combo->currentText(); }};
    }
    if (name == "review mode") {
      auto* mode = review_->modeBox();
      return {[mode] { mode->setCurrentIndex(mode->findData("whole")); }, [this] { return QString::number(run().window[0]); },
              [mode] { return mode->currentData().toString(); }};
    }
    if (name == "review overlap") {
      auto* box = review_->findChild<QDoubleSpinBox*>("reviewOverlap");
      return {stepUp(box), [this] { return QString::number(run().overlap); }, [box] { return QString::number(box->value()); }};
    }
    if (name == "review mirror") {
      auto* combo = review_->findChild<QComboBox*>("reviewMirror");
      return {[combo] { combo->setCurrentIndex(combo->findData("xyz")); },
              [this] { return QString::fromStdString(run::mirrorToString(run().mirror)); },
              [combo] { return combo->currentData().toString(); }};
    }
    auto* box = spinBox(name);
    if (!box) return {};
    const auto field = name.endsWith("patch") ? std::function<QString()>(patch)
                       : name.endsWith("batch") ? std::function<QString()>(batch)
                       : name.endsWith("steps") ? std::function<QString()>([this] { return QString::number(run().steps); })
                                                : std::function<QString()>([this] { return QString::number(run().window[0]); });
    return {stepUp(box), field, value(box)};
  }

  // The review's window box edits only in sliding-window mode (the session's starting one).
  void windowMode() { review_->modeBox()->setCurrentIndex(review_->modeBox()->findData("window")); }

private Q_SLOTS:
  void initTestCase() { test::installWarningTrap(); }
  void init() {
    session_ = std::make_unique<Session>();
    session_->createUNet(4, 3);
    placement_ = std::make_unique<PlacementView>(session_.get());
    training_ = std::make_unique<TrainingPanel>(session_.get());
    review_ = std::make_unique<ReviewPanel>(session_.get());
    for (QWidget* w : {static_cast<QWidget*>(placement_.get()), static_cast<QWidget*>(training_.get()),
                       static_cast<QWidget*>(review_.get())}) {
      w->resize(700, 700);
      w->show();
      QVERIFY(QTest::qWaitForWindowExposed(w));
    }
  }
  void cleanup() {
    review_.reset();
    training_.reset();
    placement_.reset();
    session_.reset();
    QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n")));
  }

  void editUndoRedo_data() {
    QTest::addColumn<QString>("edit");
    QTest::addColumn<QString>("text");  // the step's name on the stack (the Undo button's tooltip)
    QTest::newRow("stage precision") << "stage precision" << "set enc0 to bf16";
    QTest::newRow("recompute") << "recompute" << "recompute enc0";
    QTest::newRow("placement patch") << "placement patch" << "set patch to 80³";
    QTest::newRow("placement batch") << "placement batch" << "set batch to 3";
    QTest::newRow("offload") << "offload" << "turn host offload on";
    QTest::newRow("placement precision") << "placement precision" << "set every stage to bf16";
    QTest::newRow("training precision") << "training precision" << "set every stage to bf16";
    QTest::newRow("intensity") << "intensity" << "set intensity to ct-bone";
    QTest::newRow("training patch") << "training patch" << "set patch to 72³";
    QTest::newRow("training batch") << "training batch" << "set batch to 3";
    QTest::newRow("training steps") << "training steps" << "set steps to 210";
    QTest::newRow("review mode") << "review mode" << "infer the whole volume";
    QTest::newRow("review window") << "review window" << "set window to 112³";
    QTest::newRow("review overlap") << "review overlap" << "set overlap to 0.625";
    QTest::newRow("review mirror") << "review mirror" << "mirror along xyz";
  }
  // Through the control: the run changes, one step; undo: the run and the control as before (and
  // the control's own signal on the way back pushed nothing: redo is still there); redo: again.
  void editUndoRedo() {
    QFETCH(QString, edit);
    QFETCH(QString, text);
    if (edit == "review window") windowMode();
    const Edit e = this->edit(edit);
    QVERIFY(e.make);
    const int count = stack()->count();
    const QString runBefore = e.run(), shownBefore = e.shown();
    e.make();
    const QString runAfter = e.run(), shownAfter = e.shown();
    QVERIFY2(runAfter != runBefore, qPrintable(runAfter));
    QVERIFY2(shownAfter != shownBefore, qPrintable(shownAfter));
    QCOMPARE(stack()->count(), count + 1);
    QCOMPARE(stack()->undoText(), text);

    stack()->undo();
    QCOMPARE(e.run(), runBefore);
    QCOMPARE(e.shown(), shownBefore);
    QVERIFY(stack()->canRedo());
    QCOMPARE(stack()->count(), count + 1);

    stack()->redo();
    QCOMPARE(e.run(), runAfter);
    QCOMPARE(e.shown(), shownAfter);
    QCOMPARE(stack()->count(), count + 1);
  }

  void spinStepsMerge_data() {
    QTest::addColumn<QString>("box");
    for (const char* name : {"placement patch", "training patch", "training batch", "training steps", "review window"})
      QTest::newRow(name) << name;
  }
  // Three steps of a spin box are one undo step; stepping back to where it started is none.
  void spinStepsMerge() {
    QFETCH(QString, box);
    if (box == "review window") windowMode();
    auto* spin = spinBox(box);
    QVERIFY(spin);
    const int count = stack()->count(), start = spin->value();
    for (int i = 0; i < 3; ++i) QTest::keyClick(spin, Qt::Key_Up);
    QCOMPARE(spin->value(), start + 3 * spin->singleStep());
    QCOMPARE(stack()->count(), count + 1);
    stack()->undo();
    QCOMPARE(spin->value(), start);
    QCOMPARE(stack()->count(), count + 1);

    QTest::keyClick(spin, Qt::Key_Up);  // a new step (the redo goes)...
    QTest::keyClick(spin, Qt::Key_Down);  // ...that lands where it started: dropped
    QCOMPARE(spin->value(), start);
    QCOMPARE(stack()->count(), count);
  }

  // Undo of one field puts back that field alone: another's edit made since (a later step
  // undone first, or a run starting, which is no step) stays.
  void undoKeepsOtherFields() {
    auto* bf16 = cardButton(placement_->card("enc0"), "precisionToggle");
    QTest::mouseClick(bf16, Qt::LeftButton);                    // step 1: enc0 in bf16
    QTest::keyClick(training_->stepsBox(), Qt::Key_Up);        // step 2: 210 steps
    auto r = run();
    r.batch = 3;  // as a run starting writes what it runs into the document: no step
    session_->setRun(r);
    QCOMPARE(placement_->batchBox()->value(), 3);

    stack()->undo();
    QCOMPARE(run().steps, std::int64_t(200));
    QVERIFY(run().precision.of("enc0") == placement::Precision::BF16);
    QCOMPARE(run().batch, 3);
    stack()->undo();
    QVERIFY(run().precision.of("enc0") == placement::Precision::FP32);
    QCOMPARE(bf16->text(), QString("fp32"));
    QCOMPARE(run().steps, std::int64_t(200));
    QCOMPARE(run().batch, 3);
    QCOMPARE(training_->batchBox()->value(), 3);
  }

  // All settings' OK: every field it changed in one step.
  void settingsDialogIsOneStep() {
    RunSettingsDialog dialog(session_.get(), placement_.get());
    auto* recompute = dialog.findChild<QLineEdit*>("recomputeText");
    auto* offload = dialog.findChild<QCheckBox*>("offloadBox");
    QVERIFY(recompute && offload);
    recompute->setText("enc0,enc1");
    offload->click();
    const int count = stack()->count();
    QVERIFY2(dialog.apply(), qPrintable(dialog.problems().join("\n")));
    QCOMPARE(stack()->count(), count + 1);
    QVERIFY(run().recompute == (std::set<std::string>{"enc0", "enc1"}));
    QVERIFY(run().offload);
    QVERIFY(dialog.apply());  // nothing changed since: no step
    QCOMPARE(stack()->count(), count + 1);
    stack()->undo();
    QVERIFY(run().recompute.empty());
    QVERIFY(!run().offload);
    QVERIFY(!placement_->findChild<QCheckBox*>("hostOffload")->isChecked());
    stack()->redo();
    QCOMPARE(run().recompute.size(), std::size_t(2));
    QVERIFY(run().offload);
  }
};

SPLITSEG_UI_TEST_MAIN(RunUndoTest)
#include "RunUndoTest.moc"
