// splitseg: the workstation. Opens the volume given on the command line, else the demo CT
// written by the import step (data/demo/image.nii.gz + bone.nii.gz), else a phantom.
#include "core/engine/HostCachingAllocator.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/mainwindow/VolumeLoader.h"
#include "ui/render/VtkOpenGLWidget.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QSurfaceFormat>
#include <QTimer>


int main(int argc, char** argv) {
  // VTK's OpenGL2 backend needs a 3.2 core context; it must be the default before any widget.
  QSurfaceFormat::setDefaultFormat(splitseg::ui::VtkOpenGLWidget::defaultFormat());
  QApplication::setAttribute(Qt::AA_ShareOpenGLContexts);
  QApplication app(argc, argv);
  try {
    // Reuses freed CPU tensor memory between steps and windows (SPLITSEG_HOST_CACHE=off disables).
    splitseg::engine::installHostCachingAllocatorFromEnvironment();
  } catch (const std::exception& e) {
    qWarning("%s: the host memory cache stays off", e.what());
  }
  QApplication::setOrganizationName("SplitSeg");
  QApplication::setApplicationName("SplitSeg");
  QApplication::setApplicationVersion(SPLITSEG_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription("SplitSeg workstation: 3D segmentation with a U-Net split across devices");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("image", "Volume to open (NIfTI, NRRD, MetaImage or a DICOM folder), or a .splitseg session",
                               "[image|session]");
  QCommandLineOption labelOpt({"l", "label"}, "Ground-truth label of the image", "path");
  QCommandLineOption phantomOpt("phantom", "Open a synthetic phantom instead of the demo CT");
  QCommandLineOption datasetOpt("dataset", "Open a dataset folder (MSD or nnU-Net raw)", "folder");
  QCommandLineOption screenshotOpt("screenshot", "Save a screenshot of the window to this PNG and quit", "png");
  parser.addOptions({labelOpt, phantomOpt, datasetOpt, screenshotOpt});
  parser.process(app);

  splitseg::ui::MainWindow window;
  window.show();

  // The volume is read in the background so the window paints at once: candidates are tried
  // in turn as each read ends, a phantom is the last resort, and --screenshot waits for all that.
  using splitseg::ui::MainWindow;
  using splitseg::ui::VolumeLoader;
  struct Candidate { QString image, label; };
  QList<Candidate> candidates;
  QString fallback;  // the phantom's message when every candidate failed; empty = the last error
  QString current;  // the candidate being read; empty for a dataset's first case
  bool settled = false;
  auto settle = [&] {
    settled = true;
    if (!parser.isSet(screenshotOpt)) return;
    // Software GL renders the volume in about a second; give it a few.
    const QString png = parser.value(screenshotOpt);
    QTimer::singleShot(4000, &window, [&window, png] {
      window.grab().save(png);
      QApplication::quit();
    });
  };
  auto giveUp = [&] {
    window.openPhantom(fallback.isEmpty() ? window.statusText() + QObject::tr(" — showing a phantom") : fallback);
    settle();
  };
  auto tryNext = [&] {
    if (candidates.isEmpty()) return giveUp();
    const Candidate c = candidates.takeFirst();
    current = c.image;
    window.openVolume(c.image, c.label, MainWindow::Loading::Background);
  };
  QObject::connect(&window, &MainWindow::volumeLoadFinished, &window, [&](const QString& path, bool ok) {
    if (settled) return;
    // A file the user opened meanwhile superseded the start-up's: that one settles it too.
    if (ok || (!current.isEmpty() && path != current)) return settle();
    tryNext();
  });

  const auto args = parser.positionalArguments();
  if (parser.isSet(phantomOpt)) {
    window.openPhantom(QObject::tr("Synthetic phantom opened (--phantom)"));
    settle();
  } else if (parser.isSet(datasetOpt)) {
    if (!window.openDataset(parser.value(datasetOpt), MainWindow::Loading::Background)) giveUp();
  } else if (!args.isEmpty() && args.front().endsWith(".splitseg")) {
    // A session: its network and run at once, its volumes read in the background like a file's.
    const QStringList problems = window.openSessionFile(args.front(), MainWindow::Loading::Background);
    if (!window.isLoading()) {  // it could not be read, or names no volume that can be opened
      fallback = (problems.isEmpty() ? QObject::tr("The session names no image") : problems.front()) +
                 QObject::tr(" — showing a synthetic phantom");
      giveUp();
    }
  } else if (!args.isEmpty()) {
    candidates.push_back({args.front(), parser.value(labelOpt)});
    tryNext();
  } else {
    const QString demo = VolumeLoader::findDemo("image.nii.gz", SPLITSEG_SOURCE_DIR);
    const QString inv3 = VolumeLoader::findInVesaliusSample();
    // The imported NIfTI demo; else Debian's InVesalius project read directly; else a phantom.
    if (!demo.isEmpty()) candidates.push_back({demo, VolumeLoader::findDemo("bone.nii.gz", SPLITSEG_SOURCE_DIR)});
    if (!inv3.isEmpty()) candidates.push_back({inv3, {}});
    fallback = QObject::tr("Demo CT not found (run `splitseg-cli import-invesalius` or ./run.sh to import it) — showing a synthetic phantom");
    tryNext();
  }

  return app.exec();
}
