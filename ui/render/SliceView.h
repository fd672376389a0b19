#pragma once
// One orthogonal slice of the open volume, drawn with QPainter (fast and exact on any
// platform, no GL needed). Linked to the other views through ViewState: click sets the
// crosshair, right-drag sets window/level, the wheel scrolls slices, hovering shows the value.
#include "core/volume/Volume.h"
#include "ui/render/LabelStyle.h"

#include <array>

#include <QImage>
#include <QRectF>
#include <QString>
#include <QWidget>

#include <memory>

namespace splitseg::ui {

class ViewState;

enum class SliceOrientation { Axial, Coronal, Sagittal };

class SliceView : public QWidget {
  Q_OBJECT
public:
  SliceView(SliceOrientation orientation, ViewState* state, QWidget* parent = nullptr);

  void setVolume(std::shared_ptr<const Volume> volume);
  // Up to two overlays: slot 0 the segmentation/prediction, slot 1 e.g. the error map.
  void setOverlay(std::shared_ptr<const Volume> labels, const LabelStyle& style);
  void setOverlayStyle(const LabelStyle& style);
  void clearOverlay();

  SliceOrientation orientation() const { return orientation_; }
  std::int64_t sliceIndex() const;
  std::int64_t sliceCount() const;
  // Widget position -> voxel (x, y, z); false outside the image.
  bool voxelAt(const QPointF& pos, std::array<std::int64_t, 3>& voxel) const;
  const QString& hoverText() const { return hoverText_; }
  // The corner labels (orientation and slice, window/level) where paint draws them: side by side
  // when they fit the width, else the window/level on a second line. Never overlapping.
  struct CornerLabel {
    QString text;
    QRectF rect;
  };
  std::array<CornerLabel, 2> cornerLabels() const;
  QSize minimumSizeHint() const override { return {160, 160}; }

Q_SIGNALS:
  void hovered(const QString& text);

protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void leaveEvent(QEvent*) override;

private:
  QImage renderSlice() const;
  QRectF imageRect() const;  // where the slice lands in widget coordinates (aspect kept)
  // In-plane axes (columns, rows) and the slice axis, as volume axis indices.
  void axes(int& col, int& row, int& slice) const;
  bool flipped(int axis, bool vertical) const;
  void scroll(int delta);

  SliceOrientation orientation_;
  ViewState* state_;
  std::shared_ptr<const Volume> volume_;
  std::shared_ptr<const Volume> overlay_;
  LabelStyle style_;
  QPointF dragStart_;
  double dragWindow_ = 0, dragLevel_ = 0;
  bool windowing_ = false;
  QString hoverText_;
};

} // namespace splitseg::ui
