#pragma once
// A slab of a sharded stage in the column of the device that computes it: the stage's card stays in
// its first device's column (where its parameters live) and each other shard shows as a slab card
// joined to it by the same accent, so a sharded card spans the columns it runs on. Clicking one
// selects the stage.
#include <QFrame>

class QLabel;

namespace splitseg::ui {

class SlabCard : public QFrame {
  Q_OBJECT
public:
  SlabCard(const QString& stage, QWidget* parent = nullptr);

  const QString& stage() const { return stage_; }
  // Slab `index` (0-based) of `count`; `planes` 0 when the planner has not answered yet.
  void setSlab(int index, int count, std::int64_t planes, const QString& device);
  QString text() const;

Q_SIGNALS:
  void clicked(const QString& stage);

protected:
  void mousePressEvent(QMouseEvent* e) override;

private:
  QString stage_;
  QLabel* label_;
};

} // namespace splitseg::ui
