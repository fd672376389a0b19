#pragma once
// Draws, over the device columns, every tensor that crosses devices each step: U-Net skips
// (orange, dashed) and the main path (blue), each labelled with the megabytes it moves.
#include "ui/placement/StageMemoryModel.h"

#include <QHash>
#include <QPointer>
#include <QWidget>

namespace splitseg::ui {

class StageCard;

class TransferOverlay : public QWidget {
  Q_OBJECT
public:
  explicit TransferOverlay(QWidget* parent);
  void setTransfers(const std::vector<CrossTransfer>& transfers, const QHash<QString, StageCard*>& cards);
  int transferCount() const { return static_cast<int>(transfers_.size()); }

protected:
  void paintEvent(QPaintEvent*) override;

private:
  std::vector<CrossTransfer> transfers_;
  QHash<QString, QPointer<StageCard>> cards_;
};

} // namespace splitseg::ui
