#pragma once
// A chart line that keeps every point but hands Qt Charts at most ~2 x buckets of them:
// per bucket of x the first, min and max and last points, so spikes survive and 100,000
// points redraw as fast as 2,000.
#include <QLineSeries>
#include <QPointF>
#include <QVector>

namespace splitseg::ui {

class DecimatedSeries {
public:
  DecimatedSeries(QLineSeries* series, int buckets = 600) : series_(series), buckets_(buckets) {}

  void append(double x, double y);
  void clear();
  // Pushes the decimated points to the series when something changed.
  void flush();
  QLineSeries* series() const { return series_; }
  qsizetype size() const { return points_.size(); }
  qsizetype shownPoints() const { return series_->count(); }
  double minY() const { return minY_; }
  double maxY() const { return maxY_; }
  double maxX() const { return points_.isEmpty() ? 0 : points_.back().x(); }

  static QList<QPointF> decimate(const QVector<QPointF>& points, int buckets);

private:
  QLineSeries* series_;
  int buckets_;
  QVector<QPointF> points_;
  bool dirty_ = false;
  double minY_ = 0, maxY_ = 0;
};

} // namespace splitseg::ui
