#include "ui/mainwindow/AsyncVolumeLoader.h"

#ifdef SPLITSEG_HAVE_IO
#include "core/io/IsolatedRead.h"
#endif

#include <QElapsedTimer>
#include <QThread>

#include <exception>
#include <memory>

namespace splitseg::ui {

AsyncVolumeLoader::AsyncVolumeLoader(QObject* parent) : QObject(parent) {}

AsyncVolumeLoader::~AsyncVolumeLoader() {
  if (abandon_) *abandon_ = true;
  for (QThread* t : threads_) {
    t->wait();
    delete t;
  }
}

void AsyncVolumeLoader::start(const QString& imagePath, const QString& labelPath) {
  const bool wasBusy = busy();
  const quint64 id = ++generation_;
  pending_ = imagePath.isEmpty() ? labelPath : imagePath;
  // Reads run in a child process (core/io/IsolatedRead.h): a superseded one is stopped.
  if (abandon_) *abandon_ = true;
  auto abandon = std::make_shared<std::atomic<bool>>(false);
  abandon_ = abandon;
  auto outcome = std::make_shared<Outcome>();
  outcome->imagePath = imagePath;
  outcome->labelPath = labelPath;
  QThread* t = QThread::create([outcome, abandon] {
#ifdef SPLITSEG_HAVE_IO
    io::ReadCancelScope cancelScope(abandon.get());
#endif
    QElapsedTimer clock;
    clock.start();
    auto read = [](const QString& path) {
      try {
        return VolumeLoader::load(path);
      } catch (...) {  // load() turns std::exception into a message; anything else lands here
        VolumeLoader::Result r;
        r.error = QObject::tr("unexpected error while reading");
        return r;
      }
    };
    if (!outcome->imagePath.isEmpty()) outcome->image = read(outcome->imagePath);
    if (!outcome->labelPath.isEmpty() && (outcome->imagePath.isEmpty() || outcome->image.volume))
      outcome->label = read(outcome->labelPath);
    outcome->readMs = clock.elapsed();
  });
  t->setObjectName("splitseg-volume-reader");
  threads_.push_back(t);
  connect(t, &QThread::finished, this, [this, t, id, outcome] {
    t->wait();  // finished() is emitted just before the thread ends
    threads_.removeOne(t);
    t->deleteLater();
    if (id != generation_) return;  // superseded or cancelled
    pending_.clear();
    Q_EMIT busyChanged(false);
    Q_EMIT finished(*outcome);
  }, Qt::QueuedConnection);
  t->start();
  if (!wasBusy) Q_EMIT busyChanged(true);
}

void AsyncVolumeLoader::cancel() {
  if (!busy()) return;
  if (abandon_) *abandon_ = true;
  ++generation_;
  pending_.clear();
  Q_EMIT busyChanged(false);
}

} // namespace splitseg::ui
