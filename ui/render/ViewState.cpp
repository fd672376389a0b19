#include "ui/render/ViewState.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace splitseg::ui {

QList<WindowLevelPreset> ViewState::presets() {
  QList<WindowLevelPreset> out;
  QFile f(":/presets/windowlevel.json");
  if (f.open(QIODevice::ReadOnly)) {
    const auto arr = QJsonDocument::fromJson(f.readAll()).object().value("presets").toArray();
    for (const auto& v : arr) {
      const auto o = v.toObject();
      out.push_back({o.value("name").toString(), o.value("window").toDouble(), o.value("level").toDouble()});
    }
  }
  if (out.isEmpty()) {
    // Resources not linked (a library test): the same defaults as the file.
    out = {{"Soft tissue", 400, 40}, {"Lung", 1500, -600}, {"Bone", 2000, 300}, {"Brain", 80, 40}};
  }
  return out;
}

void ViewState::setCursor(const std::array<std::int64_t, 3>& voxel) {
  if (voxel == cursor_) return;
  cursor_ = voxel;
  Q_EMIT cursorChanged();
}

void ViewState::setWindowLevel(double window, double level) {
  window = std::max(window, 1e-6);
  if (window == window_ && level == level_) return;
  window_ = window;
  level_ = level;
  Q_EMIT windowLevelChanged();
}

} // namespace splitseg::ui
