#pragma once
// Reads a volume (and optionally its label) with VolumeLoader on a worker thread, so the window
// keeps painting while ITK reads and decompresses. Results come back on the loader's (UI)
// thread through finished(). One request counts at a time: a newer start() or cancel()
// supersedes the one in flight: its read, which runs in a child process (core/io/IsolatedRead.h),
// is stopped within ~20 ms and its result is never delivered. (With SPLITSEG_READ_ISOLATION=off
// an ITK read cannot be interrupted: it runs to its end and its result is dropped.)
#include "ui/mainwindow/VolumeLoader.h"

#include <QList>

#include <atomic>
#include <memory>
#include <QObject>
#include <QString>

class QThread;

namespace splitseg::ui {

class AsyncVolumeLoader : public QObject {
  Q_OBJECT
public:
  struct Outcome {
    QString imagePath;            // empty for a label-only request
    QString labelPath;            // empty when no label was asked for
    VolumeLoader::Result image;   // unset for a label-only request
    VolumeLoader::Result label;   // unset when no label was asked for or the image failed
    qint64 readMs = 0;            // time spent reading on the worker
  };

  explicit AsyncVolumeLoader(QObject* parent = nullptr);
  // Waits for reads still running on workers (their results are dropped).
  ~AsyncVolumeLoader() override;

  // Starts reading and returns at once; supersedes any request in flight.
  void start(const QString& imagePath, const QString& labelPath = {});
  // Drops the request in flight, if any; nothing is delivered for it.
  void cancel();
  // A request is in flight (started, not yet delivered or cancelled).
  bool busy() const { return !pending_.isEmpty(); }
  // The file of the request in flight (image, else label); empty when idle.
  QString pendingPath() const { return pending_; }
  // Worker threads still reading, superseded ones included.
  int runningReads() const { return threads_.size(); }

Q_SIGNALS:
  // On the loader's thread, for the request in flight only.
  void finished(const splitseg::ui::AsyncVolumeLoader::Outcome& outcome);
  // busy() changed.
  void busyChanged(bool busy);

private:
  quint64 generation_ = 0;
  std::shared_ptr<std::atomic<bool>> abandon_;  // the request in flight's
  QString pending_;
  QList<QThread*> threads_;
};

} // namespace splitseg::ui
