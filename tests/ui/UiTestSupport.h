#pragma once
// Shared set-up of the GUI tests: the surface format the VTK bridge needs, a message handler
// that turns every Qt warning into a test failure, and image checks for screenshots.
#include "ui/render/VtkOpenGLWidget.h"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QMutex>
#include <QStandardPaths>
#include <QStringList>
#include <QSurfaceFormat>
#include <QTest>

#include <cmath>
#include <cstdlib>

namespace splitseg::ui::test {

inline QStringList& warnings() {
  static QStringList list;
  return list;
}
inline QtMessageHandler& previousHandler() {
  static QtMessageHandler h = nullptr;
  return h;
}

inline void failOnWarnings(QtMsgType type, const QMessageLogContext& ctx, const QString& msg) {
  if (type == QtWarningMsg || type == QtCriticalMsg || type == QtFatalMsg) {
    static QMutex mutex;
    QMutexLocker lock(&mutex);
    warnings().push_back(msg);
  }
  if (previousHandler()) previousHandler()(type, ctx, msg);
}

inline void installWarningTrap() {
  previousHandler() = qInstallMessageHandler(failOnWarnings);
  // Runs the tests start write their checkpoints under the test-mode data folder, not the user's.
  QStandardPaths::setTestModeEnabled(true);
}

// Standard deviation of the grey values: ~0 for a blank (one-colour) image.
inline double greyStdDev(const QImage& image) {
  const QImage img = image.convertToFormat(QImage::Format_RGB32);
  double sum = 0, sq = 0;
  const qint64 n = qint64(img.width()) * img.height();
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) {
      const double g = qGray(line[x]);
      sum += g;
      sq += g * g;
    }
  }
  if (n == 0) return 0;
  const double mean = sum / double(n);
  return std::sqrt(std::max(0.0, sq / double(n) - mean * mean));
}

} // namespace splitseg::ui::test

// main() for a GUI test: surface format before QApplication, settings kept out of the
// user's, then the usual QTest run.
#define SPLITSEG_UI_TEST_MAIN(TestClass)                                              \
  int main(int argc, char** argv) {                                                   \
    QSurfaceFormat::setDefaultFormat(splitseg::ui::VtkOpenGLWidget::defaultFormat()); \
    if (!qEnvironmentVariableIsSet("XDG_RUNTIME_DIR")) {                              \
      qputenv("XDG_RUNTIME_DIR", QByteArray("/tmp/splitseg-test-runtime"));           \
      QDir().mkpath("/tmp/splitseg-test-runtime");                                     \
      QFile::setPermissions("/tmp/splitseg-test-runtime", QFileDevice::ReadOwner |    \
                            QFileDevice::WriteOwner | QFileDevice::ExeOwner);         \
    }                                                                                 \
    QApplication::setAttribute(Qt::AA_ShareOpenGLContexts);                           \
    QApplication app(argc, argv);                                                     \
    QStandardPaths::setTestModeEnabled(true);                                         \
    QApplication::setOrganizationName("SplitSegTest");                                \
    QApplication::setApplicationName("SplitSegTest");                                 \
    TestClass t;                                                                      \
    return QTest::qExec(&t, argc, argv);                                              \
  }
