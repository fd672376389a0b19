// splitseg-bench-ui: UI responsiveness while training (issue 6, benchmark 5). Opens the full
// workstation (slice views, 3D view, charts) on a phantom, trains from the Training tab as a user
// would, and prints the UI thread's longest and 99th-percentile stall (heartbeat every 5 ms) as
// one JSON line. With --ranks 2 the decoders go to a second rank (a local splitseg-cli worker, as
// Add host > Rank process on this machine makes it): the stall of a run over ranks. Built with
// the GUI; run under Xvfb by tests/bench/run.sh.
#include "core/engine/HostCachingAllocator.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/render/VtkOpenGLWidget.h"
#include "ui/session/RankHost.h"
#include "ui/session/Session.h"
#include "ui/training/TrainingPanel.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPushButton>
#include <QSpinBox>
#include <QComboBox>
#include <QTabWidget>
#include <QTimer>

#include <cstdio>

int main(int argc, char** argv) {
  QSurfaceFormat::setDefaultFormat(splitseg::ui::VtkOpenGLWidget::defaultFormat());
  QApplication::setAttribute(Qt::AA_ShareOpenGLContexts);
  QApplication app(argc, argv);
  splitseg::engine::installHostCachingAllocatorFromEnvironment();
  QCommandLineParser parser;
  QCommandLineOption stepsOpt("steps", "training steps", "n", "20");
  QCommandLineOption patchOpt("patch", "patch edge", "n", "32");
  QCommandLineOption baseOpt("base", "base channels", "n", "8");
  QCommandLineOption ranksOpt("ranks", "1: this process only; 2: the decoders on a local second rank", "n", "1");
  QCommandLineOption tabOpt("tab", "the Model dock's tab in front while training: training | placement", "tab",
                            "training");
  parser.addOptions({stepsOpt, patchOpt, baseOpt, ranksOpt, tabOpt});
  parser.process(app);

  splitseg::ui::MainWindow window;
  window.resize(1500, 950);
  window.show();
  window.openPhantom(QObject::tr("benchmark"));
  window.session()->createUNet(parser.value(baseOpt).toInt(), 4);
  const int ranks = parser.value(ranksOpt).toInt();
  if (ranks < 1 || ranks > 2) {
    std::fprintf(stderr, "splitseg-bench-ui: --ranks is 1 or 2\n");
    return 2;
  }
  if (ranks == 2) {
    auto* session = window.session();
    const std::string rank = session->addRank(splitseg::ui::RankHost{});
    auto placement = session->placement();
    for (const auto& s : session->stageNames())
      if (s.rfind("enc", 0) != 0) placement.assign(s, rank);
    session->setPlacement(placement);
  }
  auto* panel = window.trainingPanel();
  // The Training tab in front, as a user watching the run has it: the charts and the device
  // timeline repaint while it trains. --tab placement keeps them hidden (what they cost).
  if (parser.value(tabOpt) == "training") window.tabs()->setCurrentWidget(panel);
  panel->dataBox()->setCurrentIndex(panel->dataBox()->findData("phantom"));
  panel->patchBox()->setValue(parser.value(patchOpt).toInt());
  panel->batchBox()->setValue(1);
  panel->stepsBox()->setValue(parser.value(stepsOpt).toInt());
  panel->validateBox()->setValue(5);
  panel->budgetBox()->setValue(0);

  QElapsedTimer clock;
  int steps = 0;
  QObject::connect(panel, &splitseg::ui::TrainingPanel::stepDone, [&steps](qint64 s, qint64) { steps = int(s); });
  QObject::connect(panel, &splitseg::ui::TrainingPanel::runFinished, [&](bool stopped, const QString& error) {
    const QJsonObject out{{"longest_ms", panel->lastStallMs()},
                          {"p99_ms", panel->lastStallP99Ms()},
                          {"steps", steps},
                          {"seconds", clock.elapsed() / 1000.0},
                          {"stopped", stopped},
                          {"ranks", ranks},
                          {"tab", parser.value(tabOpt)},
                          {"error", error},
                          {"window", "MainWindow (slices, 3D view, charts)"}};
    std::printf("%s\n", QJsonDocument(out).toJson(QJsonDocument::Compact).constData());
    std::fflush(stdout);
    QApplication::exit(error.isEmpty() ? 0 : 1);
  });
  // Start once the window has painted (the 3D view's first render is not the run's doing).
  QTimer::singleShot(3000, panel, [&] {
    clock.start();
    panel->startButton()->click();
  });
  return app.exec();
}
