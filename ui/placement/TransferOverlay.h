#pragma once
// Draws, over the device columns, every tensor that crosses devices each step: U-Net skips
// (orange, dashed) and the main path (blue), each labelled with the bytes it moves per step,
// placed on its curve where it covers no card.
#include "ui/placement/StageMemoryModel.h"

#include <QHash>
#include <QPointer>
#include <QRectF>
#include <QWidget>

#include <vector>

namespace splitseg::ui {

class StageCard;

class TransferOverlay : public QWidget {
  Q_OBJECT
public:
  explicit TransferOverlay(QWidget* parent);
  void setTransfers(const std::vector<CrossTransfer>& transfers, const QHash<QString, StageCard*>& cards);
  int transferCount() const { return static_cast<int>(transfers_.size()); }
  // Where the last paint put each label (in the parent's coordinates), for tests.
  const std::vector<QRectF>& labelRects() const { return labels_; }

protected:
  void paintEvent(QPaintEvent*) override;

private:
  std::vector<CrossTransfer> transfers_;
  QHash<QString, QPointer<StageCard>> cards_;
  std::vector<QRectF> labels_;
};

} // namespace splitseg::ui
