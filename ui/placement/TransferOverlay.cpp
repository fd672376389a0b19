#include "ui/placement/TransferOverlay.h"

#include "ui/placement/StageCard.h"

#include "core/base/Units.h"

#include <QPainter>
#include <QPainterPath>

#include <vector>

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
  const QFontMetrics fm(f);
  // Every card's rectangle: a label goes where it covers none of them (nor another label).
  std::vector<QRectF> taken;
  for (const auto& c : cards_)
    if (c && c->isVisible()) taken.emplace_back(c->mapTo(parentWidget(), QPoint(0, 0)), c->size());
  const std::size_t cardCount = taken.size();
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
    // The label sits on its curve at the first point, from the sender on, where it covers no
    // card and no other label; failing that, where it covers the least.
    const QString label = QString::fromStdString(formatBytes(double(t.bytesPerStep)));
    const double w = fm.horizontalAdvance(label) + 10, h = fm.height() + 4;
    QRectF box, best;
    double bestCover = -1;
    for (int k = 0; k <= 40 && box.isNull(); ++k) {
      const QPointF at = path.pointAtPercent(0.05 + 0.9 * k / 40.0);
      const QRectF candidate(at.x() - w / 2, at.y() - h / 2, w, h);
      double cover = 0;
      for (const auto& r : taken) {
        const QRectF i = r.intersected(candidate);
        cover += i.width() * i.height();
      }
      if (cover == 0) box = candidate;
      else if (bestCover < 0 || cover < bestCover) {
        bestCover = cover;
        best = candidate;
      }
    }
    if (box.isNull()) box = best;
    taken.push_back(box);
    p.setBrush(QColor(20, 22, 28, 230));
    p.setPen(QPen(c, 1));
    p.drawRoundedRect(box, 4, 4);
    p.setPen(c.lighter(130));
    p.drawText(box, Qt::AlignCenter, label);
  }
  labels_.assign(taken.begin() + static_cast<std::ptrdiff_t>(cardCount), taken.end());
}

} // namespace splitseg::ui
