#pragma once
// A volume-rendering preset read from a JSON file (resources/presets/*.json): colour and
// opacity transfer functions over intensity, optional gradient opacity, and shading.
// "relative": true puts the control points on [0,1] of the volume's range (non-CT data).
#include <QList>
#include <QString>
#include <QVector>

#include <array>

namespace splitseg::ui {

struct TransferFunctionPreset {
  QString name;
  bool relative = false;
  QVector<std::array<double, 2>> opacity;   // (value, alpha)
  QVector<std::array<double, 4>> color;     // (value, r, g, b)
  QVector<std::array<double, 2>> gradientOpacity;
  bool shade = true;
  double ambient = 0.2, diffuse = 0.8, specular = 0.2, specularPower = 10;

  // Parses one preset; returns false (and leaves name empty) on malformed JSON.
  static bool fromJson(const QByteArray& json, TransferFunctionPreset& out);
  // Every preset under the resource folder :/presets/volume/, sorted by name.
  static QList<TransferFunctionPreset> loadAll();
};

} // namespace splitseg::ui
