#include "ui/mainwindow/SessionFile.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"
#include "core/engine/NetworkFactory.h"
#include "core/model/StagedNetwork.h"
#include "ui/mainwindow/MainWindow.h"
#include "ui/session/Session.h"

#include <QFileInfo>

#include <algorithm>

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
  // The document's run is the session's run, as it is: network, placement, every setting.
  out.run = s.run();
  if (!s.datasetFolder().isEmpty() && out.run.data.dataset.empty()) out.run.data.dataset = s.datasetFolder().toStdString();
  // The ranks the placement's "r<k>:" columns come from, and where remote workers join.
  if (!s.hosts().empty()) {
    out.view["hosts"] = hostsToJson(s.hosts());
    out.view["rendezvous_port"] = s.rendezvousPort();
  }
  return out;
}

QStringList applySession(MainWindow& window, const session::LoadResult& loaded, MainWindow::Loading mode) {
  QStringList warnings;
  // A session's paths are someone else's bytes: escaped (\xNN), so a warning is one readable line.
  for (const auto& w : loaded.warnings) warnings << QString::fromStdString(printable(w));
  const session::Session& in = loaded.session;
  Session& s = *window.session();

  if (!in.run.data.dataset.empty() && !in.datasetMissing) window.openDataset(QString::fromStdString(in.run.data.dataset), mode);
  const auto* image = in.firstVolume("image");
  if (image && !image->missing) {
    const auto* label = in.firstVolume("label");
    const QString labelPath = label && !label->missing ? QString::fromStdString(label->path) : QString();
    // In the background the read supersedes the dataset's first case, started just above.
    if (!window.openVolume(QString::fromStdString(image->path), labelPath, mode))
      warnings << QObject::tr("could not open %1").arg(QString::fromStdString(printable(image->path)));
  }

  // Hosts before the placement, so stages on their ranks stay there.
  std::vector<RankHost> hosts;
  try {
    if (in.view.contains("hosts")) hosts = hostsFromJson(in.view.at("hosts"));
    if (in.view.contains("rendezvous_port")) {
      const auto& port = in.view.at("rendezvous_port");
      if (!port.is_number_integer() || port.get<std::int64_t>() < 1 || port.get<std::int64_t>() > 65535)
        throw InvalidArgument("rendezvous_port: expected a port 1..65535");
      s.setRendezvousPort(port.get<int>());
    }
  } catch (const std::exception& e) {
    warnings << QObject::tr("hosts not restored: %1").arg(e.what());
    hosts.clear();
  }
  s.setHosts({});
  for (const auto& h : hosts) {
    try {
      s.addRank(h);
    } catch (const std::exception& e) {
      warnings << QObject::tr("rank %1 not restored: %2").arg(h.rank).arg(e.what());
    }
  }

  run::RunSpec run = in.run;
  try {
    s.setNetwork(engine::createNetwork(run.architecture, run.networkOptions.dump()));
  } catch (const std::exception& e) {
    warnings << QObject::tr("network not restored: %1").arg(e.what());
  }
  // Stages on devices this machine lacks go to its default device; the rest of the run stays.
  const auto runnable = s.runnableDevices();
  for (auto& [stage, device] : run.placement)
    if (std::find(runnable.begin(), runnable.end(), device) == runnable.end()) {
      warnings << QObject::tr("placement: %1 was on %2, which this machine lacks; moved to %3")
                      .arg(QString::fromStdString(stage), QString::fromStdString(device),
                           QString::fromStdString(s.defaultDevice()));
      device = s.defaultDevice();
    }
  s.setRun(run);
  return warnings;
}

} // namespace splitseg::ui
