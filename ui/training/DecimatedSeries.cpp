#include "ui/training/DecimatedSeries.h"

#include <algorithm>

namespace splitseg::ui {

void DecimatedSeries::append(double x, double y) {
  if (points_.isEmpty()) minY_ = maxY_ = y;
  minY_ = std::min(minY_, y);
  maxY_ = std::max(maxY_, y);
  points_.push_back({x, y});
  dirty_ = true;
}

void DecimatedSeries::clear() {
  points_.clear();
  series_->clear();
  dirty_ = false;
}

void DecimatedSeries::flush() {
  if (!dirty_) return;
  dirty_ = false;
  series_->replace(decimate(points_, buckets_));
}

QList<QPointF> DecimatedSeries::decimate(const QVector<QPointF>& points, int buckets) {
  const qsizetype n = points.size();
  if (n <= 4 * buckets) return QList<QPointF>(points.begin(), points.end());
  QList<QPointF> out;
  out.reserve(4 * buckets);
  const double per = double(n) / buckets;
  for (int b = 0; b < buckets; ++b) {
    const auto lo = static_cast<qsizetype>(b * per), hi = std::min(n, static_cast<qsizetype>((b + 1) * per));
    if (lo >= hi) continue;
    qsizetype imin = lo, imax = lo;
    for (auto i = lo; i < hi; ++i) {
      if (points[i].y() < points[imin].y()) imin = i;
      if (points[i].y() > points[imax].y()) imax = i;
    }
    // Keep x order within the bucket so the line does not fold back.
    qsizetype idx[4] = {lo, std::min(imin, imax), std::max(imin, imax), hi - 1};
    qsizetype last = -1;
    for (auto i : idx)
      if (i != last) { out.push_back(points[i]); last = i; }
  }
  return out;
}

} // namespace splitseg::ui
