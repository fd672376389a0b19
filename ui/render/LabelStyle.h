#pragma once
// How a label map is drawn: one colour and visibility per label value, one opacity overall.
#include <QColor>
#include <QVector>

namespace splitseg::ui {

struct LabelStyle {
  QVector<QColor> colors;     // index = label value; 0 (background) is never drawn
  QVector<bool> visible;      // same indexing; missing entries are visible
  double opacity = 0.5;

  static QColor defaultColor(int label) {
    static const QColor table[] = {QColor(0, 0, 0), QColor(230, 60, 60), QColor(60, 200, 90),
                                   QColor(70, 120, 240), QColor(240, 200, 40), QColor(200, 80, 220),
                                   QColor(40, 210, 220), QColor(250, 140, 40)};
    return table[label % 8 == 0 && label > 0 ? 1 : label % 8];
  }
  QColor color(int label) const { return label < colors.size() ? colors[label] : defaultColor(label); }
  bool isVisible(int label) const { return label >= visible.size() || visible[label]; }
};

} // namespace splitseg::ui
