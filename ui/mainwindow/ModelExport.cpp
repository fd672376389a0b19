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
  // The run's preprocessing: what training, review and the CLI do before the network sees an image.
  exporter::ExportOptions o;
  o.preprocessingJson = session.run().preprocessing.toJson();
  o.patch = session.run().patch;
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
