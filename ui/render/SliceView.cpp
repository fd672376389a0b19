#include "ui/render/SliceView.h"

#include "ui/render/ViewState.h"

#include <QFontMetricsF>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace splitseg::ui {

SliceView::SliceView(SliceOrientation orientation, ViewState* state, QWidget* parent)
    : QWidget(parent), orientation_(orientation), state_(state) {
  setMouseTracking(true);
  setFocusPolicy(Qt::ClickFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  connect(state_, &ViewState::cursorChanged, this, qOverload<>(&QWidget::update));
  connect(state_, &ViewState::windowLevelChanged, this, qOverload<>(&QWidget::update));
}

void SliceView::setVolume(std::shared_ptr<const Volume> volume) {
  volume_ = std::move(volume);
  overlay_.reset();
  update();
}

void SliceView::setOverlay(std::shared_ptr<const Volume> labels, const LabelStyle& style) {
  overlay_ = std::move(labels);
  style_ = style;
  update();
}

void SliceView::setOverlayStyle(const LabelStyle& style) {
  style_ = style;
  update();
}

void SliceView::clearOverlay() {
  overlay_.reset();
  update();
}

void SliceView::axes(int& col, int& row, int& slice) const {
  switch (orientation_) {
    case SliceOrientation::Axial: col = 0; row = 1; slice = 2; break;
    case SliceOrientation::Coronal: col = 0; row = 2; slice = 1; break;
    case SliceOrientation::Sagittal: col = 1; row = 2; slice = 0; break;
  }
}

bool SliceView::flipped(int axis, bool vertical) const {
  // Shown as radiologists expect in LPS: patient left on the right, posterior down (axial),
  // superior up. An axis whose direction cosine points the other way is drawn reversed.
  const bool negative = volume_ && volume_->geometry().direction[static_cast<std::size_t>(axis * 4)] < 0;
  const bool superiorUp = vertical && axis == 2;  // z grows upwards on screen
  return negative != superiorUp;
}

std::int64_t SliceView::sliceIndex() const {
  int c, r, s;
  axes(c, r, s);
  return state_->cursor()[s];
}

std::int64_t SliceView::sliceCount() const {
  if (!volume_) return 0;
  int c, r, s;
  axes(c, r, s);
  return volume_->size()[s];
}

QRectF SliceView::imageRect() const {
  if (!volume_) return {};
  int c, r, s;
  axes(c, r, s);
  const auto& g = volume_->geometry();
  const double wmm = g.size[c] * g.spacing[c], hmm = g.size[r] * g.spacing[r];
  const double scale = std::min(width() / wmm, height() / hmm);
  const double w = wmm * scale, h = hmm * scale;
  return {(width() - w) / 2.0, (height() - h) / 2.0, w, h};
}

QImage SliceView::renderSlice() const {
  int c, r, s;
  axes(c, r, s);
  const auto& size = volume_->size();
  const int cols = static_cast<int>(size[c]), rows = static_cast<int>(size[r]);
  QImage img(cols, rows, QImage::Format_RGB32);
  const double lo = state_->level() - state_->window() / 2.0;
  const double scale = 255.0 / state_->window();
  const std::int64_t si = std::clamp<std::int64_t>(sliceIndex(), 0, size[s] - 1);
  const bool overlay = overlay_ && overlay_->geometry().size == volume_->size();
  const double a = style_.opacity;
  const bool fc = flipped(c, false), fr = flipped(r, true);
  for (int y = 0; y < rows; ++y) {
    const std::int64_t rv = fr ? rows - 1 - y : y;
    auto* line = reinterpret_cast<QRgb*>(img.scanLine(y));
    for (int x = 0; x < cols; ++x) {
      std::array<std::int64_t, 3> v{};
      v[c] = fc ? cols - 1 - x : x; v[r] = rv; v[s] = si;
      const auto idx = volume_->index(v[0], v[1], v[2]);
      const int g = static_cast<int>(std::clamp((volume_->data()[idx] - lo) * scale, 0.0, 255.0));
      int R = g, G = g, B = g;
      if (overlay) {
        const int label = static_cast<int>(std::lround(overlay_->data()[idx]));
        if (label > 0 && style_.isVisible(label)) {
          const QColor col = style_.color(label);
          R = static_cast<int>(R * (1 - a) + col.red() * a);
          G = static_cast<int>(G * (1 - a) + col.green() * a);
          B = static_cast<int>(B * (1 - a) + col.blue() * a);
        }
      }
      line[x] = qRgb(R, G, B);
    }
  }
  return img;
}

void SliceView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(12, 12, 14));
  static const char* names[] = {"Axial", "Coronal", "Sagittal"};
  p.setPen(QColor(230, 200, 90));
  if (!volume_ || volume_->empty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("%1 — no volume").arg(names[int(orientation_)]));
    return;
  }
  const QRectF target = imageRect();
  p.setRenderHint(QPainter::SmoothPixmapTransform, true);
  p.drawImage(target, renderSlice());

  // Crosshair through the cursor voxel (voxel centres).
  int c, r, s;
  axes(c, r, s);
  const auto& size = volume_->size();
  const auto& cur = state_->cursor();
  double fx = (cur[c] + 0.5) / size[c], fy = (cur[r] + 0.5) / size[r];
  if (flipped(c, false)) fx = 1.0 - fx;
  if (flipped(r, true)) fy = 1.0 - fy;
  const QPointF cp(target.left() + fx * target.width(), target.top() + fy * target.height());
  p.setPen(QPen(QColor(80, 220, 120, 170), 1));
  p.drawLine(QPointF(target.left(), cp.y()), QPointF(target.right(), cp.y()));
  p.drawLine(QPointF(cp.x(), target.top()), QPointF(cp.x(), target.bottom()));

  p.setPen(QColor(230, 200, 90));
  for (const auto& label : cornerLabels()) p.drawText(label.rect, Qt::AlignLeft | Qt::AlignVCenter, label.text);
  if (!hoverText_.isEmpty())
    p.drawText(QRectF(6, height() - 20, width() - 12, 18), Qt::AlignLeft | Qt::AlignVCenter, hoverText_);
}

std::array<SliceView::CornerLabel, 2> SliceView::cornerLabels() const {
  static const char* names[] = {"Axial", "Coronal", "Sagittal"};
  const QFontMetricsF fm(font());
  CornerLabel slice{tr("%1  %2/%3").arg(names[int(orientation_)]).arg(sliceIndex() + 1).arg(sliceCount()), {}};
  CornerLabel wl{tr("W %1 L %2").arg(state_->window(), 0, 'f', 0).arg(state_->level(), 0, 'f', 0), {}};
  const double line = 18, margin = 6, gap = 12;
  const double a = fm.horizontalAdvance(slice.text) + 1, b = fm.horizontalAdvance(wl.text) + 1;
  slice.rect = QRectF(margin, 4, a, line);
  if (margin + a + gap + b <= width() - margin)
    wl.rect = QRectF(width() - margin - b, 4, b, line);  // top right
  else
    wl.rect = QRectF(margin, 4 + line, b, line);  // narrow view: under the slice label
  return {slice, wl};
}

bool SliceView::voxelAt(const QPointF& pos, std::array<std::int64_t, 3>& voxel) const {
  if (!volume_) return false;
  const QRectF target = imageRect();
  if (!target.contains(pos)) return false;
  int c, r, s;
  axes(c, r, s);
  const auto& size = volume_->size();
  double fx = (pos.x() - target.left()) / target.width();
  double fy = (pos.y() - target.top()) / target.height();
  if (flipped(c, false)) fx = 1.0 - fx;
  if (flipped(r, true)) fy = 1.0 - fy;
  voxel = state_->cursor();
  voxel[c] = std::clamp<std::int64_t>(static_cast<std::int64_t>(fx * size[c]), 0, size[c] - 1);
  voxel[r] = std::clamp<std::int64_t>(static_cast<std::int64_t>(fy * size[r]), 0, size[r] - 1);
  voxel[s] = std::clamp<std::int64_t>(voxel[s], 0, size[s] - 1);
  return true;
}

void SliceView::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::RightButton || (e->button() == Qt::LeftButton && e->modifiers() & Qt::ShiftModifier)) {
    windowing_ = true;
    dragStart_ = e->position();
    dragWindow_ = state_->window();
    dragLevel_ = state_->level();
    return;
  }
  std::array<std::int64_t, 3> v{};
  if (e->button() == Qt::LeftButton && voxelAt(e->position(), v)) state_->setCursor(v);
}

void SliceView::mouseMoveEvent(QMouseEvent* e) {
  if (windowing_) {
    // Horizontal drag widens the window, vertical drag moves the level (as most viewers).
    const QPointF d = e->position() - dragStart_;
    const double unit = std::max(1.0, dragWindow_ / 200.0);
    state_->setWindowLevel(std::max(1.0, dragWindow_ + d.x() * unit), dragLevel_ - d.y() * unit);
    return;
  }
  std::array<std::int64_t, 3> v{};
  if ((e->buttons() & Qt::LeftButton) && voxelAt(e->position(), v)) state_->setCursor(v);
  if (voxelAt(e->position(), v)) {
    hoverText_ = tr("(%1, %2, %3)  %4").arg(v[0]).arg(v[1]).arg(v[2]).arg(volume_->at(v[0], v[1], v[2]), 0, 'g', 5);
    if (overlay_ && overlay_->geometry().size == volume_->size())
      hoverText_ += tr("  label %1").arg(std::lround(overlay_->at(v[0], v[1], v[2])));
  } else {
    hoverText_.clear();
  }
  Q_EMIT hovered(hoverText_);
  update();
}

void SliceView::mouseReleaseEvent(QMouseEvent*) { windowing_ = false; }

void SliceView::leaveEvent(QEvent*) {
  hoverText_.clear();
  update();
}

void SliceView::scroll(int delta) {
  if (!volume_) return;
  int c, r, s;
  axes(c, r, s);
  auto v = state_->cursor();
  v[s] = std::clamp<std::int64_t>(v[s] + delta, 0, volume_->size()[s] - 1);
  state_->setCursor(v);
}

void SliceView::wheelEvent(QWheelEvent* e) { scroll(e->angleDelta().y() > 0 ? 1 : -1); }

void SliceView::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
    case Qt::Key_Up: case Qt::Key_Right: scroll(1); break;
    case Qt::Key_Down: case Qt::Key_Left: scroll(-1); break;
    case Qt::Key_PageUp: scroll(10); break;
    case Qt::Key_PageDown: scroll(-10); break;
    default: QWidget::keyPressEvent(e);
  }
}

} // namespace splitseg::ui
