#pragma once
// One U-Net stage in the placement view: name, parameters, predicted memory. Pressing and
// dragging it (with the other selected cards) onto a device column moves the stages. The
// drag is done in-process with the implicit mouse grab rather than QDrag, so it behaves the
// same for users and for QTest's synthetic mouse events.
#include <QFrame>

class QLabel;
class QToolButton;

namespace splitseg::ui {

class StageCard : public QFrame {
  Q_OBJECT
public:
  StageCard(const QString& stage, QWidget* parent = nullptr);

  const QString& stage() const { return stage_; }
  // Encoder, bottleneck, decoder and head get their own accent so the U shape reads at a glance.
  static QString accentOf(const QString& stage);
  void setDetails(const QString& parameters, const QString& memory, const QString& tooltip);
  void setSelected(bool selected);
  bool isSelected() const { return selected_; }
  void setCheckpointed(bool on);
  void setBf16(bool on);
  bool isBf16() const;
  QSize sizeHint() const override;
  // Keyboard modifiers held when the last drag ended (Shift: shard onto the target column).
  Qt::KeyboardModifiers dropModifiers() const { return dropModifiers_; }
  // "× 2 slabs" under the name of a sharded stage; empty for a stage on one device.
  void setShards(const QString& text);

Q_SIGNALS:
  // modifiers decide between select-only and toggle (Ctrl).
  void clicked(const QString& stage, Qt::KeyboardModifiers modifiers);
  void pressed(const QString& stage, Qt::KeyboardModifiers modifiers);
  // globalPos: where the drag is now / where it ended.
  void dragMoved(const QString& stage, const QPoint& globalPos);
  void dragDropped(const QString& stage, const QPoint& globalPos);
  void checkpointToggled(const QString& stage, bool on);
  void precisionToggled(const QString& stage, bool bf16);
  void contextMenuRequested(const QString& stage, const QPoint& globalPos);

protected:
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void contextMenuEvent(QContextMenuEvent* e) override;

private:
  void refreshStyle();

  QString stage_;
  QLabel* title_;
  QLabel* details_;
  QLabel* shards_;
  Qt::KeyboardModifiers dropModifiers_;
  QToolButton* checkpoint_;
  QToolButton* precision_;
  bool selected_ = false;
  bool pressed_ = false;
  bool dragging_ = false;
  QPoint pressPos_;
};

} // namespace splitseg::ui
