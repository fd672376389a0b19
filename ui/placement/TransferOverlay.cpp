#include "ui/placement/TransferOverlay.h"

#include "ui/placement/StageCard.h"

#include <QPainter>
#include <QPainterPath>

namespace splitseg::ui {

TransferOverlay::TransferOverlay(QWidget* parent) : QWidget(parent) {
  // Purely a drawing layer: clicks and drags go to the cards underneath.
  setAttribute(Qt::WA_TransparentForMouseEvents);
  setAttribute(Qt::WA_NoSystemBackground);
}

void TransferOverlay::setTransfers(const std::vector<CrossTransfer>& transfers, const QHash<QString, StageCard*>& cards) {
  transfers_ = transfers;
  cards_.clear();
  for (auto it = cards.begin(); it != cards.end(); ++it) cards_.insert(it.key(), it.value());
  update();
}

void TransferOverlay::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  f.setBold(true);
  p.setFont(f);
  int n = 0;
  for (const auto& t : transfers_) {
    const auto a = cards_.value(QString::fromStdString(t.fromStage));
    const auto b = cards_.value(QString::fromStdString(t.toStage));
    if (!a || !b || !a->isVisible() || !b->isVisible()) continue;
    const QRect ra(a->mapTo(parentWidget(), QPoint(0, 0)), a->size());
    const QRect rb(b->mapTo(parentWidget(), QPoint(0, 0)), b->size());
    const bool rightward = ra.center().x() < rb.center().x();
    const QPointF pa(rightward ? ra.right() : ra.left(), ra.center().y());
    const QPointF pb(rightward ? rb.left() : rb.right(), rb.center().y());
    const double bend = std::max(40.0, std::abs(pb.x() - pa.x()) * 0.45);
    QPainterPath path(pa);
    path.cubicTo(pa + QPointF(rightward ? bend : -bend, 0), pb + QPointF(rightward ? -bend : bend, 0), pb);
    const QColor c = t.skip ? QColor(240, 150, 60) : QColor(100, 160, 255);
    p.setPen(QPen(c, 2.2, t.skip ? Qt::DashLine : Qt::SolidLine, Qt::RoundCap));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    // Arrow head at the receiving card.
    const double dir = rightward ? -1 : 1;
    p.setBrush(c);
    p.setPen(Qt::NoPen);
    p.drawPolygon(QPolygonF({pb, pb + QPointF(dir * 9, -5), pb + QPointF(dir * 9, 5)}));
    // Label, staggered so neighbouring labels do not sit on each other.
    const QString label = QString("%1 MB").arg(double(t.bytesPerStep) / 1e6, 0, 'f', t.bytesPerStep < 1e7 ? 1 : 0);
    // Near the sending card: the sources sit at different heights, so labels do not pile up
    // where the curves converge.
    const QPointF mid = path.pointAtPercent(t.skip ? 0.2 : 0.5 + 0.08 * ((n++ % 3) - 1));
    const QRectF box(mid.x() - 34, mid.y() - 9, 68, 18);
    p.setBrush(QColor(20, 22, 28, 230));
    p.setPen(QPen(c, 1));
    p.drawRoundedRect(box, 4, 4);
    p.setPen(c.lighter(130));
    p.drawText(box, Qt::AlignCenter, label);
  }
}

} // namespace splitseg::ui
