#include "ui/training/DeviceTimeline.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace splitseg::ui {

namespace {
constexpr int kReservedLanes = 4;
constexpr int kLabelWidth = 150, kLegendHeight = 20, kStepRowHeight = 16, kLaneHeight = 22, kLaneGap = 4,
              kAxisHeight = 22;

QColor colourOf(engine::SpanKind kind) {
  switch (kind) {
    case engine::SpanKind::Forward: return QColor("#5b9bd5");
    case engine::SpanKind::Backward: return QColor("#e8a33d");
    case engine::SpanKind::Recompute: return QColor("#c06fd6");
    case engine::SpanKind::Transfer: return QColor("#4fc3c8");
    case engine::SpanKind::Wait: return QColor("#5c636e");
    case engine::SpanKind::Optimizer: return QColor("#7cb95a");
  }
  return Qt::gray;
}

// Draw order: waits and transfers under the work, recompute on top of its backward.
int layer(engine::SpanKind kind) {
  switch (kind) {
    case engine::SpanKind::Wait: return 0;
    case engine::SpanKind::Transfer: return 1;
    case engine::SpanKind::Recompute: return 3;
    default: return 2;
  }
}

QString formatSeconds(double s) {
  if (std::abs(s) < 1.0) return QString::number(s * 1000.0, 'f', s < 0.01 ? 2 : 1) + " ms";
  return QString::number(s, 'f', 3) + " s";
}

// A round tick spacing (1, 2 or 5 x 10^k seconds) giving about `wanted` ticks over `range`.
double tickStep(double range, int wanted) {
  const double raw = range / std::max(1, wanted);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10.0 * p;
}
} // namespace

DeviceTimeline::DeviceTimeline(QWidget* parent) : QWidget(parent) {
  setObjectName("deviceTimeline");
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName(tr("Device timeline"));
  repaint_.setSingleShot(true);
  repaint_.setInterval(100);  // at most ~10 repaints a second whatever the step rate
  connect(&repaint_, &QTimer::timeout, this, qOverload<>(&QWidget::update));
}

void DeviceTimeline::reset() {
  steps_.clear();
  const bool grown = static_cast<int>(lanes_.size()) > kReservedLanes;
  lanes_.clear();
  viewStart_ = viewEnd_ = 0;
  followLatest_ = true;
  if (grown) updateGeometry();
  update();
}

void DeviceTimeline::addStep(std::int64_t step, double seconds, const std::vector<engine::TimelineSpan>& spans) {
  if (spans.empty()) return;
  Step s;
  s.number = step;
  s.seconds = seconds;
  for (const auto& sp : spans) s.seconds = std::max(s.seconds, sp.end);  // a rank's clock may run past rank 0's
  s.spans = spans;
  steps_.push_back(std::move(s));
  while (steps_.size() > kMaxSteps) steps_.pop_front();
  double offset = 0;
  for (auto& st : steps_) {
    st.offset = offset;
    offset += st.seconds;
  }
  const auto before = lanes_.size();
  for (const auto& st : steps_)
    for (const auto& lane : engine::timelineLanes(st.spans))
      if (std::find(lanes_.begin(), lanes_.end(), lane) == lanes_.end()) lanes_.push_back(lane);
  if (lanes_.size() != before && static_cast<int>(lanes_.size()) > kReservedLanes) updateGeometry();
  if (followLatest_) {
    viewStart_ = 0;
    viewEnd_ = offset;
  } else {
    clampView();
  }
  scheduleRepaint();
}

void DeviceTimeline::scheduleRepaint() {
  if (!repaint_.isActive()) repaint_.start();
}

double DeviceTimeline::totalSeconds() const { return steps_.empty() ? 0.0 : steps_.back().offset + steps_.back().seconds; }

double DeviceTimeline::utilisation(const std::string& lane) const {
  double busy = 0, wall = 0;
  for (const auto& s : steps_) {
    busy += engine::laneBusySeconds(s.spans, lane);
    wall += s.seconds;
  }
  return wall > 0 ? std::min(1.0, busy / wall) : 0.0;
}

QSize DeviceTimeline::sizeHint() const {
  // Room for kReservedLanes from the start: a run's first step must not change the panel's size
  // (a relayout re-renders the 3D view, slow in software GL, on the UI thread).
  const int lanes = std::max<int>(kReservedLanes, static_cast<int>(lanes_.size()));
  return {600, kLegendHeight + kStepRowHeight + lanes * (kLaneHeight + kLaneGap) + kAxisHeight + 6};
}

QSize DeviceTimeline::minimumSizeHint() const { return {300, sizeHint().height()}; }

QRectF DeviceTimeline::plotRect() const {
  const double top = kLegendHeight + kStepRowHeight;
  return QRectF(kLabelWidth, top, std::max(10, width() - kLabelWidth - 8), height() - top - kAxisHeight);
}

QRectF DeviceTimeline::laneRect(int lane) const {
  const QRectF p = plotRect();
  return QRectF(p.left(), p.top() + lane * (kLaneHeight + kLaneGap), p.width(), kLaneHeight);
}

double DeviceTimeline::xOf(double seconds) const {
  const QRectF p = plotRect();
  const double range = std::max(1e-9, viewEnd_ - viewStart_);
  return p.left() + (seconds - viewStart_) / range * p.width();
}

double DeviceTimeline::secondsAt(double x) const {
  const QRectF p = plotRect();
  return viewStart_ + (x - p.left()) / std::max(1.0, p.width()) * (viewEnd_ - viewStart_);
}

QRectF DeviceTimeline::spanRect(const std::string& lane, const std::string& stage, engine::SpanKind kind, int micro) const {
  const auto it = std::find(lanes_.begin(), lanes_.end(), lane);
  if (it == lanes_.end() || steps_.empty()) return {};
  const QRectF row = laneRect(static_cast<int>(it - lanes_.begin()));
  const auto& last = steps_.back();
  for (const auto& s : last.spans)
    if (s.lane == lane && s.stage == stage && s.kind == kind && s.micro == micro) {
      const double x0 = xOf(last.offset + s.start), x1 = std::max(x0 + 1.0, xOf(last.offset + s.end));
      QRectF r(x0, row.top(), x1 - x0, row.height());
      if (kind == engine::SpanKind::Recompute) r.setHeight(row.height() / 2);
      return r.intersected(plotRect());
    }
  return {};
}

std::optional<DeviceTimeline::Hit> DeviceTimeline::hitAt(const QPoint& pos) const {
  if (!plotRect().contains(pos)) return std::nullopt;
  int lane = -1;
  for (int i = 0; i < static_cast<int>(lanes_.size()); ++i)
    if (laneRect(i).contains(pos)) lane = i;
  if (lane < 0) return std::nullopt;
  const double t = secondsAt(pos.x());
  const double slack = (viewEnd_ - viewStart_) / std::max(1.0, plotRect().width()) * 2;  // 2 px
  const bool upperHalf = pos.y() < laneRect(lane).center().y();
  std::optional<Hit> best;
  int bestLayer = -1;
  double bestDistance = 0;
  for (const auto& st : steps_)
    for (const auto& s : st.spans) {
      if (s.lane != lanes_[static_cast<std::size_t>(lane)]) continue;
      if (t < st.offset + s.start - slack || t > st.offset + s.end + slack) continue;
      if (s.kind == engine::SpanKind::Recompute && !upperHalf) continue;
      // The topmost layer wins; within a layer, the span under the pointer before one that is
      // only within the slack (narrow neighbours).
      const double distance = std::max({0.0, st.offset + s.start - t, t - st.offset - s.end});
      if (layer(s.kind) > bestLayer || (layer(s.kind) == bestLayer && distance < bestDistance)) {
        best = Hit{&st, &s};
        bestLayer = layer(s.kind);
        bestDistance = distance;
      }
    }
  return best;
}

QString DeviceTimeline::describeAt(const QPoint& pos) const {
  const auto hit = hitAt(pos);
  if (!hit) return {};
  const auto& s = *hit->span;
  QString what = s.stage.empty() ? QString() : QString::fromStdString(s.stage) + " ";
  what += engine::toString(s.kind);
  if (s.kind == engine::SpanKind::Wait) what = tr("waiting for %1").arg(s.stage.empty() ? tr("another rank") : QString::fromStdString(s.stage));
  QString micro;
  for (const auto& other : hit->step->spans)
    if (other.micro > 0) {
      micro = tr(", micro-batch %1").arg(s.micro);
      break;
    }
  return tr("%1%2 on %3\nstep %4: %5 – %6 (%7)")
      .arg(what, micro, QString::fromStdString(s.lane))
      .arg(hit->step->number)
      .arg(formatSeconds(s.start), formatSeconds(s.end), formatSeconds(s.end - s.start));
}

void DeviceTimeline::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor("#1b1f27"));
  p.setRenderHint(QPainter::Antialiasing, false);
  QFont small = font();
  small.setPointSizeF(std::max(7.0, font().pointSizeF() - 1));
  p.setFont(small);
  const QFontMetrics fm(small);

  // Legend.
  int x = 6;
  for (auto kind : {engine::SpanKind::Forward, engine::SpanKind::Backward, engine::SpanKind::Recompute,
                    engine::SpanKind::Transfer, engine::SpanKind::Wait, engine::SpanKind::Optimizer}) {
    p.fillRect(QRect(x, 6, 10, 10), colourOf(kind));
    x += 14;
    const QString name = engine::toString(kind);
    p.setPen(QColor("#c9d1d9"));
    p.drawText(x, 15, name);
    x += fm.horizontalAdvance(name) + 12;
  }
  p.setPen(QColor("#8b949e"));
  p.drawText(x + 8, 15, tr("idle: background"));

  if (steps_.empty()) {
    p.setPen(QColor("#8b949e"));
    p.drawText(rect().adjusted(12, kLegendHeight, -12, 0), Qt::AlignCenter | Qt::TextWordWrap,
               tr("No timeline yet. Start a run: each device's forward, backward, recompute, transfer and "
                  "waiting spans of the last %1 steps appear here.").arg(kMaxSteps));
    return;
  }

  const QRectF plot = plotRect();
  // Lanes: names and utilisation.
  for (int i = 0; i < static_cast<int>(lanes_.size()); ++i) {
    const QRectF row = laneRect(i);
    p.fillRect(row, QColor("#232833"));
    const auto& lane = lanes_[static_cast<std::size_t>(i)];
    p.setPen(QColor("#e6edf3"));
    const QRectF label(4, row.top(), kLabelWidth - 10, row.height());
    const QString util = QString::number(utilisation(lane) * 100.0, 'f', 0) + "%";
    p.drawText(label, Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(QString::fromStdString(lane), Qt::ElideMiddle, kLabelWidth - 24 - fm.horizontalAdvance(util)));
    p.setPen(QColor("#7ee787"));
    p.drawText(label, Qt::AlignVCenter | Qt::AlignRight, util);
  }

  // Spans, clipped to the plot; each at least one pixel wide so short ones stay visible.
  p.save();
  p.setClipRect(plot);
  for (int pass = 0; pass <= 3; ++pass)
    for (const auto& st : steps_)
      for (const auto& s : st.spans) {
        if (layer(s.kind) != pass) continue;
        const auto it = std::find(lanes_.begin(), lanes_.end(), s.lane);
        const QRectF row = laneRect(static_cast<int>(it - lanes_.begin()));
        const double x0 = xOf(st.offset + s.start), x1 = std::max(x0 + 1.0, xOf(st.offset + s.end));
        if (x1 < plot.left() || x0 > plot.right()) continue;
        QRectF r(x0, row.top(), x1 - x0, row.height());
        if (s.kind == engine::SpanKind::Recompute) r.setHeight(row.height() / 2);
        if (s.kind == engine::SpanKind::Wait) r.adjust(0, row.height() * 0.3, 0, -row.height() * 0.3);
        p.fillRect(r, colourOf(s.kind));
        if (r.width() > 4) {
          p.setPen(QColor(0, 0, 0, 90));
          p.drawLine(QPointF(r.left(), r.top()), QPointF(r.left(), r.bottom()));
        }
        QString text = QString::fromStdString(s.stage);
        if (s.micro > 0 || text.isEmpty()) text += s.micro > 0 ? QString("·%1").arg(s.micro) : QString();
        if (s.kind != engine::SpanKind::Wait && !text.isEmpty() && fm.horizontalAdvance(text) + 4 < r.width()) {
          p.setPen(QColor("#0d1117"));
          p.drawText(r, Qt::AlignCenter, text);
        }
      }
  // Step boundaries.
  QPen dashed(QColor("#8b949e"));
  dashed.setStyle(Qt::DashLine);
  for (const auto& st : steps_) {
    const double bx = xOf(st.offset);
    p.setPen(dashed);
    p.drawLine(QPointF(bx, plot.top() - kStepRowHeight + 2), QPointF(bx, plot.bottom()));
  }
  p.restore();
  // Step labels where they fit: the long form, else the number only, never over each other.
  double labelsEnd = -1e9;
  for (const auto& st : steps_) {
    const double bx = std::max(plot.left(), xOf(st.offset)) + 4;
    const double room = std::min(plot.right(), xOf(st.offset + st.seconds)) - bx - 4;
    if (bx < labelsEnd || room <= 0) continue;
    QString text = tr("step %1 · %2").arg(st.number).arg(formatSeconds(st.seconds));
    if (fm.horizontalAdvance(text) > room) text = tr("step %1").arg(st.number);
    if (fm.horizontalAdvance(text) > room) text = QString::number(st.number);
    if (fm.horizontalAdvance(text) > room) continue;
    p.setPen(QColor("#c9d1d9"));
    p.drawText(QPointF(bx, plot.top() - 4), text);
    labelsEnd = bx + fm.horizontalAdvance(text) + 6;
  }

  // Time axis at round values, in ms below a second.
  const double range = viewEnd_ - viewStart_;
  const double stepS = tickStep(range, std::max(2, static_cast<int>(plot.width() / 90)));
  const double axisY = plot.top() + lanes_.size() * (kLaneHeight + kLaneGap) + 2;
  p.setPen(QColor("#8b949e"));
  p.drawLine(QPointF(plot.left(), axisY), QPointF(plot.right(), axisY));
  const bool ms = range < 2.0;
  for (double t = std::ceil(viewStart_ / stepS) * stepS; t <= viewEnd_ + 1e-12; t += stepS) {
    const double tx = xOf(t);
    p.drawLine(QPointF(tx, axisY), QPointF(tx, axisY + 4));
    const QString label = ms ? QString::number(t * 1000.0, 'g', 6) + " ms" : QString::number(t, 'g', 6) + " s";
    p.drawText(QPointF(tx - fm.horizontalAdvance(label) / 2.0, axisY + 4 + fm.ascent()), label);
  }
}

void DeviceTimeline::zoom(double factor, double anchor) {
  if (steps_.empty()) return;
  const double total = totalSeconds();
  double range = std::clamp((viewEnd_ - viewStart_) * factor, total * 1e-4, total);
  const double share = (anchor - viewStart_) / std::max(1e-12, viewEnd_ - viewStart_);
  viewStart_ = anchor - share * range;
  viewEnd_ = viewStart_ + range;
  followLatest_ = range >= total * 0.999;
  clampView();
  update();
}

void DeviceTimeline::pan(double seconds) {
  viewStart_ += seconds;
  viewEnd_ += seconds;
  clampView();
  update();
}

void DeviceTimeline::clampView() {
  const double total = totalSeconds();
  const double range = std::min(total, viewEnd_ - viewStart_);
  viewStart_ = std::clamp(viewStart_, 0.0, std::max(0.0, total - range));
  viewEnd_ = viewStart_ + range;
}

void DeviceTimeline::wheelEvent(QWheelEvent* e) {
  const double notches = e->angleDelta().y() / 120.0;
  if (notches == 0) return;
  zoom(std::pow(0.8, notches), secondsAt(e->position().x()));
  e->accept();
}

void DeviceTimeline::mousePressEvent(QMouseEvent* e) {
  dragFrom_ = e->position().toPoint();
  dragViewStart_ = viewStart_;
  setFocus(Qt::MouseFocusReason);
}

void DeviceTimeline::mouseMoveEvent(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) {
    const double perPixel = (viewEnd_ - viewStart_) / std::max(1.0, plotRect().width());
    const double range = viewEnd_ - viewStart_;
    viewStart_ = dragViewStart_ - (e->position().x() - dragFrom_.x()) * perPixel;
    viewEnd_ = viewStart_ + range;
    clampView();
    update();
  }
}

void DeviceTimeline::mouseDoubleClickEvent(QMouseEvent*) {
  followLatest_ = true;
  viewStart_ = 0;
  viewEnd_ = totalSeconds();
  update();
}

void DeviceTimeline::keyPressEvent(QKeyEvent* e) {
  const double centre = (viewStart_ + viewEnd_) / 2, range = viewEnd_ - viewStart_;
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoom(0.5, centre); break;
    case Qt::Key_Minus: zoom(2.0, centre); break;
    case Qt::Key_Left: pan(-range / 4); break;
    case Qt::Key_Right: pan(range / 4); break;
    case Qt::Key_0:
    case Qt::Key_Home: mouseDoubleClickEvent(nullptr); break;
    default: QWidget::keyPressEvent(e); return;
  }
  e->accept();
}

bool DeviceTimeline::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = describeAt(help->pos());
    if (text.isEmpty()) return QWidget::event(e);  // the widget's own tooltip: how to zoom
    QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(e);
}

} // namespace splitseg::ui
