#include "ui/training/StallMeter.h"

#include <algorithm>
#include <cmath>

namespace splitseg::ui {

StallMeter::StallMeter(QObject* parent, int intervalMs) : QObject(parent), interval_(intervalMs) {
  timer_.setTimerType(Qt::PreciseTimer);
  timer_.setInterval(intervalMs);
  connect(&timer_, &QTimer::timeout, this, &StallMeter::beat);
}

void StallMeter::start() {
  longest_ = 0;
  stalls_.clear();
  clock_.start();
  last_ = clock_.nsecsElapsed();
  timer_.start();
}

void StallMeter::stop() { timer_.stop(); }

void StallMeter::beat() {
  const qint64 now = clock_.nsecsElapsed();
  const double gapMs = double(now - last_) / 1e6 - interval_;
  longest_ = std::max(longest_, gapMs);
  stalls_.push_back(std::max(0.0, gapMs));
  last_ = now;
}

double StallMeter::percentileStallMs(double p) const {
  if (stalls_.empty()) return 0;
  std::vector<double> v = stalls_;
  // Nearest rank: the smallest stall that at least p% of the beats do not exceed.
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * v.size()));
  const auto k = std::min(v.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

} // namespace splitseg::ui
