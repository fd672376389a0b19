// Every panel builds, shows at no less than its minimum size, and logs no warning.
#include "tests/ui/UiTestSupport.h"

#include "core/data/Phantom.h"
#include "ui/mainwindow/DataPanel.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/placement/PlacementView.h"
#include "ui/render/SliceView.h"
#include "ui/render/ViewState.h"
#include "ui/render/VolumeView3d.h"
#include "ui/review/ReviewPanel.h"
#include "ui/session/Session.h"
#include "ui/training/TrainingPanel.h"

#include <QComboBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>

using namespace splitseg;
using namespace splitseg::ui;

class PanelsSmokeTest : public QObject {
  Q_OBJECT

  void showAndCheck(QWidget* w) {
    w->resize(w->minimumSizeHint().expandedTo(QSize(200, 200)));
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w));
    QTest::qWait(50);
    const QSize min = w->minimumSizeHint();
    QVERIFY2(w->width() >= min.width() && w->height() >= min.height(),
             qPrintable(QString("%1x%2 below minimum %3x%4").arg(w->width()).arg(w->height()).arg(min.width()).arg(min.height())));
  }

private Q_SLOTS:
  void initTestCase() { test::installWarningTrap(); }
  void cleanup() { QVERIFY2(test::warnings().isEmpty(), qPrintable(test::warnings().join("\n"))); }

  void sliceViews() {
    ViewState state;
    data::PhantomOptions o;
    o.size = {40, 32, 24};
    const auto ph = data::makePhantom(o);
    for (auto orient : {SliceOrientation::Axial, SliceOrientation::Coronal, SliceOrientation::Sagittal}) {
      SliceView view(orient, &state);
      view.setVolume(std::make_shared<Volume>(ph.image));
      showAndCheck(&view);
      // Wheel scrolls the slice; click moves the shared crosshair.
      const auto before = view.sliceIndex();
      QWheelEvent wheel(QPointF(50, 50), view.mapToGlobal(QPointF(50, 50)), {}, QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                        Qt::NoScrollPhase, false);
      QApplication::sendEvent(&view, &wheel);
      QCOMPARE(view.sliceIndex(), before + 1);
      QTest::mouseClick(&view, Qt::LeftButton, {}, view.rect().center());
      std::array<std::int64_t, 3> v{};
      QVERIFY(view.voxelAt(view.rect().center(), v));
      QCOMPARE(state.cursor(), v);
      // The corner labels never overlap, narrow (the four-view layout beside five device
      // columns) or wide, and stay inside the view.
      for (int width : {160, 220, 600}) {
        view.resize(width, 200);
        const auto labels = view.cornerLabels();
        QVERIFY2(!labels[0].rect.intersects(labels[1].rect),
                 qPrintable(QString("%1 px: '%2' overlaps '%3'").arg(width).arg(labels[0].text, labels[1].text)));
        for (const auto& l : labels) QVERIFY(l.rect.right() <= width && l.rect.left() >= 0);
      }
    }
  }

  void volumeView() {
    data::PhantomOptions o;
    o.size = {32, 32, 32};
    const auto ph = data::makePhantom(o);
    VolumeView3d view;
    view.setVolume(std::make_shared<Volume>(ph.image));
    view.setLabelSurfaces(std::make_shared<Volume>(ph.label), LabelStyle{});
    showAndCheck(&view);
    QTRY_VERIFY_WITH_TIMEOUT(view.framesRendered() > 0, 20000);
    QVERIFY(view.surfaceCount() >= 1);
  }

  void placementView() {
    Session session;
    session.createUNet(8, 5);
    PlacementView view(&session);
    showAndCheck(&view);
    QVERIFY(view.card("enc0"));
    QVERIFY(view.column("cpu"));
  }

  void trainingPanel() {
    Session session;
    session.createUNet(4, 3);
    TrainingPanel panel(&session);
    showAndCheck(&panel);
    QVERIFY(panel.startButton()->isEnabled());
    QVERIFY(!panel.stopButton()->isEnabled());
  }

  void reviewPanel() {
    Session session;
    session.createUNet(4, 3);
    ReviewPanel panel(&session);
    showAndCheck(&panel);
  }

  void dataPanel() {
    Session session;
    ViewState state;
    DataPanel panel(&session, &state);
    showAndCheck(&panel);
    // The window/level box names the preset in use, else says what the window is.
    auto* box = panel.windowPresetBox();
    const auto preset = box->itemData(1).toPointF();
    state.setWindowLevel(preset.x(), preset.y());
    QCOMPARE(box->currentIndex(), 1);
    state.setWindowLevel(505, 73);
    QCOMPARE(box->currentIndex(), -1);
    QCOMPARE(box->placeholderText(), QString("Custom (505/73)"));
  }

  void mainWindow() {
    MainWindow w;
    w.resize(1100, 720);
    w.openPhantom("phantom");
    showAndCheck(&w);
    QVERIFY(w.session()->image());
    QCOMPARE(w.tabs()->count(), 3);
    QTRY_VERIFY_WITH_TIMEOUT(w.volumeView()->framesRendered() > 0, 20000);
  }
};

SPLITSEG_UI_TEST_MAIN(PanelsSmokeTest)
#include "PanelsSmokeTest.moc"
