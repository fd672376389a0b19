#include "ui/mainwindow/SessionFile.h"
#include "core/engine/NetworkFactory.h"
#include "core/model/StagedNetwork.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/session/Session.h"

#include <QFileInfo>

namespace splitseg::ui {

namespace {
// Sources the window shows that are not files (a phantom) are not saved.
bool isFile(const QString& source) { return !source.isEmpty() && QFileInfo::exists(source); }
} // namespace

session::Session captureSession(const MainWindow& window) {
  const Session& s = *window.session();
  session::Session out;
  if (isFile(s.imageSource())) out.volumes.push_back({s.imageSource().toStdString(), "image", "", false});
  if (isFile(s.groundTruthSource())) out.volumes.push_back({s.groundTruthSource().toStdString(), "label", "", false});
  out.dataset = s.datasetFolder().toStdString();
  if (auto net = s.network()) {
    out.architecture = net->architecture();
    out.options = nlohmann::json::parse(net->optionsJson());
    out.placement = nlohmann::json::parse(s.placement().toJson());
  }
  const auto& run = s.runSettings();
  out.training.patch = run.patch;
  out.training.batch = run.batch;
  out.training.precision = run.precisionText(s.stageNames());
  out.training.recompute.assign(run.checkpointStages.begin(), run.checkpointStages.end());
  return out;
}

QStringList applySession(MainWindow& window, const session::LoadResult& loaded) {
  QStringList warnings;
  for (const auto& w : loaded.warnings) warnings << QString::fromStdString(w);
  const session::Session& in = loaded.session;
  Session& s = *window.session();

  if (!in.dataset.empty() && !in.datasetMissing) window.openDataset(QString::fromStdString(in.dataset));
  const auto* image = in.firstVolume("image");
  if (image && !image->missing) {
    const auto* label = in.firstVolume("label");
    const QString labelPath = label && !label->missing ? QString::fromStdString(label->path) : QString();
    if (!window.openVolume(QString::fromStdString(image->path), labelPath))
      warnings << QObject::tr("could not open %1").arg(QString::fromStdString(image->path));
  }

  try {
    s.setNetwork(engine::createNetwork(in.architecture, in.options.dump()));
  } catch (const std::exception& e) {
    warnings << QObject::tr("network not restored: %1").arg(e.what());
  }
  if (!in.placement.empty()) {
    try {
      auto p = placement::Placement::fromJson(in.placement.dump(), s.stageNames());
      p.checkDevices(s.runnableDevices());
      s.setPlacement(p);
    } catch (const std::exception& e) {
      warnings << QObject::tr("placement not restored: %1").arg(e.what());
    }
  }
  RunSettings run = s.runSettings();
  run.patch = in.training.patch;
  run.batch = in.training.batch;
  try {
    run.setPrecisionText(in.training.precision);  // "fp32" / "bf16" of older files included
  } catch (const std::exception& e) {
    warnings << QObject::tr("precision not restored: %1").arg(e.what());
  }
  run.checkpointStages = {in.training.recompute.begin(), in.training.recompute.end()};
  s.setRunSettings(run);
  return warnings;
}

} // namespace splitseg::ui
