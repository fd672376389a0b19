#pragma once
// The placement view: one column per device (every GPU LibTorch sees, the CPU, and any
// planning-only GPU), one card per stage. Dragging cards onto a column moves those stages
// (one undo step per drop); cross-device tensors are drawn with their size per step; the
// predicted total per device is compared with its memory.
#include "ui/placement/StageMemoryModel.h"

#include <QHash>
#include <QSet>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QScrollArea;
class QHBoxLayout;

namespace splitseg::ui {

class DeviceColumn;
class PlannerWorker;
class Session;
class SlabCard;
class StageCard;
class TransferOverlay;

class PlacementView : public QWidget {
  Q_OBJECT
public:
  // The run controls it shares with the training panel (the document's patch and batch).
  QSpinBox* patchBox() const { return patch_; }
  QSpinBox* batchBox() const { return batch_; }
  explicit PlacementView(Session* session, QWidget* parent = nullptr);

  StageCard* card(const QString& stage) const { return cards_.value(stage); }
  QList<SlabCard*> slabs(const QString& stage) const { return slabs_.value(stage); }
  DeviceColumn* column(const QString& device) const;
  // The width this view needs to show `columns` device columns side by side without scrolling.
  int widthForColumns(int columns) const;
  QStringList selectedStages() const;
  void setSelection(const QStringList& stages);
  const PlacementEstimate& estimate() const { return estimate_; }
  TransferOverlay* overlay() const { return overlay_; }
  // Adds a planning-only GPU with this many bytes (the toolbar asks the user for GiB).
  void addPlanningDevice(std::int64_t bytes);
  // Moves stages through the undo stack, as a drop does.
  void moveStages(const QStringList& stages, const std::string& device);
  // Shards each stage over `devices` (slab order), one undo step; one device unshards it.
  void shardStages(const QStringList& stages, const std::vector<std::string>& devices);
  // Adds `device` to each stage's shards (Shift+drop onto a column), one undo step.
  void shardOnto(const QStringList& stages, const std::string& device);
  // Planner-driven, on a worker thread (the UI never waits): choose a placement (one undo step;
  // autoPlaceDone says whether it changed anything) and the largest cube that fits with the
  // current one (shown in the summary; largestDone). cancelPlanning stops either.
  void autoPlace();
  void findLargestVolume();
  void cancelPlanning();
  // Times a few training steps of the network on this machine's devices (at the patch, or the
  // largest like it up to 96^3), so that the predicted step time and Auto-place use this
  // machine's speeds instead of the defaults (speedsMeasured; the session keeps them).
  void measureSpeeds();
  // True while the planner works on an edit or a search (the view shows a busy bar).
  bool planning() const;
  // Keyboard: the selection moves to the column `delta` places over (Alt+Left/Right), or is
  // sharded onto the next column too (Alt+Shift+Right); Alt+Up/Down selects the stage before/after.
  void moveSelectionBy(int delta);
  void shardSelectionOntoNext();
  void selectNeighbour(int delta);
  QSize minimumSizeHint() const override { return {380, 360}; }

Q_SIGNALS:
  void placementEdited();
  void autoPlaceDone(bool changed);
  void largestDone();
  void speedsMeasured(bool ok);
  // The planner's numbers for the current placement arrived (cards, columns, overlay, summary).
  void estimateShown();

protected:
  void resizeEvent(QResizeEvent* e) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

private:
  void rebuildColumns();
  void rebuildCards();
  void placeCards();
  void refreshNumbers();  // asks the planner; showNumbers() when it answers
  void showNumbers();
  void syncControls();
  void onPressed(const QString& stage, Qt::KeyboardModifiers mods);
  void onClicked(const QString& stage, Qt::KeyboardModifiers mods);
  void onDragMoved(const QString& stage, const QPoint& globalPos);
  void onDropped(const QString& stage, const QPoint& globalPos);
  void showCardMenu(const QString& stage, const QPoint& globalPos);
  DeviceColumn* columnAt(const QPoint& globalPos) const;
  void askPlanningDevice();

  Session* session_;
  QScrollArea* scroll_;
  QWidget* board_;
  QHBoxLayout* columnsLayout_;
  TransferOverlay* overlay_;
  QLabel* ghost_;
  QLabel* summary_;
  PlannerWorker* planner_;
  QProgressBar* busy_;
  QPushButton* cancel_;
  QComboBox* precision_;
  QCheckBox* offload_;
  QSpinBox* patch_;
  QSpinBox* batch_;
  QList<DeviceColumn*> columns_;
  QHash<QString, StageCard*> cards_;
  QHash<QString, QList<SlabCard*>> slabs_;  // sharded stages: one per shard after the first
  QSet<QString> selected_;
  PlacementEstimate estimate_;
  QString largest_;
};

} // namespace splitseg::ui
