#pragma once
// The device timeline: one lane per device (per rank), the last few steps laid end to end,
// forward / backward / recompute / transfer / wait / optimizer spans from the engine's own
// per-step record (StepMetrics::timeline), each lane's utilisation as a figure. Wheel or +/-
// zooms around the pointer, drag or Left/Right pans, 0 or a double click shows everything again;
// hovering a span shows its exact times. Only the last kMaxSteps steps are kept, and repaints are
// coalesced, so a long run stays as smooth as a short one.
#include "core/engine/StepTimeline.h"

#include <QTimer>
#include <QWidget>

#include <deque>
#include <optional>
#include <vector>

namespace splitseg::ui {

class DeviceTimeline : public QWidget {
  Q_OBJECT
public:
  static constexpr int kMaxSteps = 4;

  explicit DeviceTimeline(QWidget* parent = nullptr);

  void reset();
  // A step's spans (ignored when it has none: the run records no timeline).
  void addStep(std::int64_t step, double seconds, const std::vector<engine::TimelineSpan>& spans);

  // What is shown, for the status line and tests.
  const std::vector<std::string>& lanes() const { return lanes_; }
  int stepsShown() const { return static_cast<int>(steps_.size()); }
  // Busy share of the shown steps' wall time, 0..1 (engine::laneBusySeconds over the steps).
  double utilisation(const std::string& lane) const;
  // The span under a widget position, described as the tooltip does ("" if none).
  QString describeAt(const QPoint& pos) const;
  // Where a span is drawn (widget coordinates); empty when it is not shown.
  QRectF spanRect(const std::string& lane, const std::string& stage, engine::SpanKind kind, int micro = 0) const;
  // Seconds of the shown steps visible now (zoom).
  double visibleSeconds() const { return viewEnd_ - viewStart_; }
  double totalSeconds() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  bool event(QEvent* e) override;

private:
  struct Step {
    std::int64_t number = 0;
    double offset = 0;   // seconds from the first shown step's start
    double seconds = 0;
    std::vector<engine::TimelineSpan> spans;
  };
  struct Hit {
    const Step* step;
    const engine::TimelineSpan* span;
  };
  QRectF plotRect() const;
  QRectF laneRect(int lane) const;
  double xOf(double seconds) const;
  double secondsAt(double x) const;
  std::optional<Hit> hitAt(const QPoint& pos) const;
  void zoom(double factor, double anchorSeconds);
  void pan(double seconds);
  void clampView();
  void scheduleRepaint();

  std::deque<Step> steps_;
  std::vector<std::string> lanes_;
  double viewStart_ = 0, viewEnd_ = 0;
  bool followLatest_ = true;  // not zoomed: the view tracks the newest steps
  QPoint dragFrom_;
  double dragViewStart_ = 0;
  QTimer repaint_;
};

} // namespace splitseg::ui
