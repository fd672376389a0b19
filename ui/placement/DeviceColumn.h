#pragma once
// One device in the placement view: its name and memory, a capacity bar with the predicted
// total, and the cards of the stages placed on it. Drop target for dragged cards.
#include "core/engine/Devices.h"

#include <QFrame>

class QLabel;
class QToolButton;
class QVBoxLayout;

namespace splitseg::ui {

class SlabCard;
class StageCard;

class DeviceColumn : public QFrame {
  Q_OBJECT
public:
  DeviceColumn(const engine::DeviceInfo& device, QWidget* parent = nullptr);

  const std::string& device() const { return info_.name; }
  const engine::DeviceInfo& info() const { return info_; }
  void addCard(StageCard* card);
  void addSlab(SlabCard* slab);  // a slab of a stage sharded onto this device (after its card's turn)
  // Predicted bytes on this device; above its total the column is marked over capacity.
  void setPredicted(std::int64_t bytes, bool fromPlanner);
  bool overCapacity() const { return over_; }
  void setDropHighlight(bool on);
  // Why this rank stopped or cannot join ("" clears it): a red line under the title.
  void setProblem(const QString& text);
  QString problem() const;
  int rank() const { return rank_; }  // -1: a device of this process
  QSize sizeHint() const override { return {200, 420}; }

Q_SIGNALS:
  void removeRequested(const QString& device);

protected:
  void paintEvent(QPaintEvent* e) override;

private:
  void refreshStyle();

  engine::DeviceInfo info_;
  QLabel* title_;
  QLabel* memory_;
  QLabel* problem_;
  int rank_ = -1;
  QVBoxLayout* cards_;
  std::int64_t predicted_ = 0;
  bool over_ = false;
  bool highlight_ = false;
};

} // namespace splitseg::ui
