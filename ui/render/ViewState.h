#pragma once
// State shared by the slice views so they stay linked: the crosshair (a voxel of the open
// volume) and the window/level. One instance per main window.
#include <QObject>

#include <array>
#include <cstdint>

namespace splitseg::ui {

struct WindowLevelPreset {
  QString name;
  double window;
  double level;
};

class ViewState : public QObject {
  Q_OBJECT
public:
  explicit ViewState(QObject* parent = nullptr) : QObject(parent) {}

  const std::array<std::int64_t, 3>& cursor() const { return cursor_; }
  double window() const { return window_; }
  double level() const { return level_; }

  // CT presets; read from resources/presets/windowlevel.json when present.
  static QList<WindowLevelPreset> presets();

  void setCursor(const std::array<std::int64_t, 3>& voxel);
  void setWindowLevel(double window, double level);

Q_SIGNALS:
  void cursorChanged();
  void windowLevelChanged();

private:
  std::array<std::int64_t, 3> cursor_{0, 0, 0};
  double window_ = 400;
  double level_ = 40;
};

} // namespace splitseg::ui
