#pragma once
// Measures how long the UI thread was unable to run its event loop: a heartbeat timer fires
// every few milliseconds; the longest gap beyond its interval is the longest stall.
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace splitseg::ui {

class StallMeter : public QObject {
  Q_OBJECT
public:
  explicit StallMeter(QObject* parent = nullptr, int intervalMs = 5);
  void start();
  void stop();
  bool running() const { return timer_.isActive(); }
  // Longest gap between heartbeats minus the interval, in ms, since start().
  double longestStallMs() const { return longest_; }

private:
  void beat();

  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = 0;
  double longest_ = 0;
  int interval_;
};

} // namespace splitseg::ui
