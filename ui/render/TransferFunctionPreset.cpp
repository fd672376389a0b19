#include "ui/render/TransferFunctionPreset.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace splitseg::ui {

namespace {
template <std::size_t N>
QVector<std::array<double, N>> points(const QJsonArray& arr) {
  QVector<std::array<double, N>> out;
  for (const auto& v : arr) {
    const auto p = v.toArray();
    if (p.size() != static_cast<int>(N)) continue;
    std::array<double, N> a{};
    for (std::size_t i = 0; i < N; ++i) a[i] = p[static_cast<int>(i)].toDouble();
    out.push_back(a);
  }
  return out;
}
} // namespace

bool TransferFunctionPreset::fromJson(const QByteArray& json, TransferFunctionPreset& out) {
  QJsonParseError err{};
  const auto doc = QJsonDocument::fromJson(json, &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) return false;
  const auto o = doc.object();
  out.name = o.value("name").toString();
  out.relative = o.value("relative").toBool(false);
  out.opacity = points<2>(o.value("scalarOpacity").toArray());
  out.color = points<4>(o.value("color").toArray());
  out.gradientOpacity = points<2>(o.value("gradientOpacity").toArray());
  out.shade = o.value("shade").toBool(true);
  out.ambient = o.value("ambient").toDouble(0.2);
  out.diffuse = o.value("diffuse").toDouble(0.8);
  out.specular = o.value("specular").toDouble(0.2);
  out.specularPower = o.value("specularPower").toDouble(10);
  return !out.name.isEmpty() && !out.opacity.isEmpty() && !out.color.isEmpty();
}

QList<TransferFunctionPreset> TransferFunctionPreset::loadAll() {
  QList<TransferFunctionPreset> out;
  const QDir dir(":/presets/volume");
  for (const auto& file : dir.entryList({"*.json"}, QDir::Files, QDir::Name)) {
    QFile f(dir.filePath(file));
    TransferFunctionPreset p;
    if (f.open(QIODevice::ReadOnly) && fromJson(f.readAll(), p)) out.push_back(p);
  }
  return out;
}

} // namespace splitseg::ui
