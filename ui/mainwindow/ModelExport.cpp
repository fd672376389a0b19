#include "ui/mainwindow/ModelExport.h"

#include "core/export/TorchScriptExport.h"
#include "core/volume/Preprocessing.h"
#include "ui/session/Session.h"

#include <QFile>
#include <QFileInfo>
#include <QObject>

namespace splitseg::ui {

ModelExportResult exportSessionModel(Session& session, const QString& path) {
  ModelExportResult r;
  auto network = session.network();
  if (!network) {
    r.message = QObject::tr("Nothing to export: no network");
    return r;
  }
  if (session.busy()) {
    r.message = QObject::tr("Cannot export while a run uses the network: stop it or wait for it to finish");
    return r;
  }
  // What the workstation does to an image before the network sees it (VolumeSampleSource):
  // the volume as loaded, z-scored over all voxels.
  Preprocessing pre;
  pre.canonical = false;
  pre.intensity.mode = IntensityMode::ZScore;
  pre.intensity.preset = "workstation z-score";
  exporter::ExportOptions o;
  o.preprocessingJson = pre.toJson();
  o.patch = session.runSettings().patch;
  const bool existed = QFileInfo::exists(path);
  try {
    const auto written = exporter::exportTorchScript(*network, path.toStdString(), o);
    r.ok = true;
    r.message = QObject::tr("Exported %1 (%2 parameters) and %3")
                    .arg(QFileInfo(QString::fromStdString(written.modelPath)).fileName())
                    .arg(written.parameters)
                    .arg(QFileInfo(QString::fromStdString(written.preprocessingPath)).fileName());
  } catch (const std::exception& e) {
    if (!existed) QFile::remove(path);  // no half-written model left behind
    r.message = QObject::tr("Could not export the model: %1").arg(e.what());
  }
  return r;
}

} // namespace splitseg::ui
