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
  parser.addPositionalArgument("image", "Volume to open (NIfTI, NRRD, MetaImage or a DICOM folder)", "[image]");
  QCommandLineOption labelOpt({"l", "label"}, "Ground-truth label of the image", "path");
  QCommandLineOption phantomOpt("phantom", "Open a synthetic phantom instead of the demo CT");
  QCommandLineOption datasetOpt("dataset", "Open a dataset folder (MSD or nnU-Net raw)", "folder");
  QCommandLineOption screenshotOpt("screenshot", "Save a screenshot of the window to this PNG and quit", "png");
  parser.addOptions({labelOpt, phantomOpt, datasetOpt, screenshotOpt});
  parser.process(app);

  splitseg::ui::MainWindow window;
  window.show();

  const auto args = parser.positionalArguments();
  if (parser.isSet(phantomOpt)) {
    window.openPhantom(QObject::tr("Synthetic phantom opened (--phantom)"));
  } else if (parser.isSet(datasetOpt)) {
    if (!window.openDataset(parser.value(datasetOpt))) window.openPhantom(window.statusText() + QObject::tr(" — showing a phantom"));
  } else if (!args.isEmpty()) {
    if (!window.openVolume(args.front(), parser.value(labelOpt)))
      window.openPhantom(window.statusText() + QObject::tr(" — showing a phantom"));
  } else {
    using splitseg::ui::VolumeLoader;
    const QString demo = VolumeLoader::findDemo("image.nii.gz", SPLITSEG_SOURCE_DIR);
    const QString inv3 = VolumeLoader::findInVesaliusSample();
    // The imported NIfTI demo; else Debian's InVesalius project read directly; else a phantom.
    if (!(!demo.isEmpty() && window.openVolume(demo, VolumeLoader::findDemo("bone.nii.gz", SPLITSEG_SOURCE_DIR))) &&
        !(!inv3.isEmpty() && window.openVolume(inv3)))
      window.openPhantom(QObject::tr("Demo CT not found (run `splitseg-cli import-invesalius` or ./run.sh to import it) — showing a synthetic phantom"));
  }

  if (parser.isSet(screenshotOpt)) {
    // Software GL renders the volume in about a second; give it a few.
    const QString png = parser.value(screenshotOpt);
    QTimer::singleShot(4000, &window, [&window, png] {
      window.grab().save(png);
      QApplication::quit();
    });
  }
  return app.exec();
}
