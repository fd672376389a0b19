#pragma once
// Measures how long the UI thread was unable to run its event loop: a heartbeat timer fires
// every few milliseconds; a gap beyond its interval is a stall. Reports the longest and the 99th
// percentile (one long stall is a hiccup, a high percentile is a sluggish window).
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <vector>

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
  // The p-th percentile (0..100) of the per-beat stalls since start(), in ms; 0 before any beat.
  double percentileStallMs(double p) const;
  int beats() const { return static_cast<int>(stalls_.size()); }

private:
  void beat();

  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = 0;
  double longest_ = 0;
  std::vector<double> stalls_;
  int interval_;
};

} // namespace splitseg::ui
