#include "ui/training/StallMeter.h"

#include <algorithm>

namespace splitseg::ui {

StallMeter::StallMeter(QObject* parent, int intervalMs) : QObject(parent), interval_(intervalMs) {
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(intervalMs);
  connect(&timer_, &QTimer::timeout, this, &StallMeter::beat);
}

void StallMeter::start() {
  longest_ = 0;
  clock_.start();
  last_ = clock_.nsecsElapsed();
  timer_.start();
}

void StallMeter::stop() { timer_.stop(); }

void StallMeter::beat() {
  const qint64 now = clock_.nsecsElapsed();
  const double gapMs = double(now - last_) / 1e6 - interval_;
  longest_ = std::max(longest_, gapMs);
  last_ = now;
}

} // namespace splitseg::ui
