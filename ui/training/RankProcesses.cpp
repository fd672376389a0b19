#include "ui/training/RankProcesses.h"
#include "ui/training/TrainingWorker.h"
#include "ui/session/RankHost.h"
#include "ui/session/Session.h"
#include "core/engine/Devices.h"
#include "core/ranks/LocalRanks.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTimer>


#include <algorithm>

namespace splitseg::ui {

RankProcesses::RankProcesses(QObject* parent)
    : QObject(parent), processes_(std::make_unique<ranks::LocalRankProcesses>()), poll_(new QTimer(this)) {
  poll_->setInterval(100);
  connect(poll_, &QTimer::timeout, this, &RankProcesses::pollEnded);
}

RankProcesses::~RankProcesses() { stopAll(); }

QString RankProcesses::workerProgram() {
  const QString env = qEnvironmentVariable("SPLITSEG_CLI");
  if (!env.isEmpty()) return env;
  const QString beside = QDir(QCoreApplication::applicationDirPath()).filePath("splitseg-cli");
  if (QFileInfo(beside).isExecutable()) return beside;
  return QStandardPaths::findExecutable("splitseg-cli");
}

QString RankProcesses::start(const QList<int>& workerRanks, int port, int worldSize, int timeoutSeconds,
                             const std::string& secret) {
  stopAll();
  ++generation_;
  const QString program = workerProgram();
  if (program.isEmpty()) return tr("splitseg-cli was not found beside the workstation or on PATH: it runs the ranks");
  std::vector<ranks::LocalRankSpec> specs;
  // The workstation's rank and each worker share this machine's cores.
  for (const int rank : workerRanks)
    specs.push_back({rank, worldSize, static_cast<int>(workerRanks.size()) + 1, port, timeoutSeconds, secret});
  try {
    // Below the UI, like rank 0's thread.
    processes_->start(program.toStdString(), {"worker"}, specs, /*captureStderr=*/true, TrainingWorker::kTrainingNice);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  poll_->start();
  return {};
}

void RankProcesses::pollEnded() {
  for (const auto& e : processes_->poll()) {
    if (!e.failed()) continue;
    const QString how = e.signal != 0 ? tr("rank %1 was killed").arg(e.rank)
                                      : tr("rank %1 exited with status %2").arg(e.rank).arg(e.exitCode);
    const QString last = QString::fromStdString(e.lastLine).trimmed();
    Q_EMIT rankFailed(e.rank, last.isEmpty() ? how : how + ": " + last);
  }
  if (processes_->running() == 0) poll_->stop();
}

QString RankProcesses::startForSession(const Session& session, int timeoutSeconds, ranks::RankEnv& env,
                                       std::string& joinHint) {
  joinHint.clear();
  const int world = session.placement().rankCount();
  QList<int> local;
  QStringList remote;
  for (int r = 1; r < world; ++r) {
    const auto& hosts = session.hosts();
    const auto h = std::find_if(hosts.begin(), hosts.end(), [&](const RankHost& x) { return x.rank == r; });
    if (h == hosts.end())
      return tr("The placement names rank %1, which no host provides: add it with Add host… or move its stages").arg(r);
    if (h->local())
      local << r;
    else
      remote << QString::fromStdString(h->host);
  }
  // Remote workers connect to the port they were told; a run on this machine alone takes a free one.
  const int port = remote.isEmpty() ? ranks::freeLocalPort() : session.rendezvousPort();
  if (port <= 0) return tr("No free port on 127.0.0.1 for the ranks' rendezvous");
  // With remote workers rank 0 listens where they reach it (the route to this host's name, or
  // GLOO_SOCKET_IFNAME); alone here, on 127.0.0.1 only.
  const std::string host = QSysInfo::machineHostName().toStdString();
  env.masterAddr = remote.isEmpty() ? "127.0.0.1" : host;
  env.masterPort = port;
  env.secret = session.runSecret();
  env.interfaces = ranks::interfacesFromEnvironment();
  env.rank = 0;
  env.worldSize = world;
  env.localWorldSize = static_cast<int>(local.size()) + 1;  // rank 0 and the workers started here share its cores
  if (const QString why = start(local, port, world, timeoutSeconds, env.secret); !why.isEmpty()) return why;
  QStringList lines;
  for (const auto& h : session.hosts())
    if (!h.local() && h.rank < world)
      lines << tr("on %1: %2").arg(QString::fromStdString(h.host),
                                   QString::fromStdString(workerCommand(host, port, h.rank, world, env.secret)));
  if (!lines.isEmpty())
    joinHint = tr("start the remote ranks within %1 s —\n%2").arg(timeoutSeconds).arg(lines.join("\n")).toStdString();
  return {};
}

void RankProcesses::finish(int graceMs) {
  // Only this run's workers: a run started within the grace period keeps its own.
  QTimer::singleShot(graceMs, this, [this, generation = generation_] {
    if (generation == generation_) stopAll();
  });
}

void RankProcesses::endRun(Session& session, const QString& error) {
  // Workers end right after rank 0; whatever still runs after a grace period is stopped.
  finish(5000);
  if (const int rank = rankNamedIn(error); rank > 0 && session.rankProblem(rank).isEmpty()) session.setRankProblem(rank, error);
}

int RankProcesses::rankNamedIn(const QString& error) {
  for (auto it = QRegularExpression("\\brank (\\d+)\\b").globalMatch(error); it.hasNext();)
    if (const int rank = it.next().captured(1).toInt(); rank > 0) return rank;
  return 0;
}

int RankProcesses::running() const { return processes_->running(); }

qint64 RankProcesses::pidOf(int rank) const { return processes_->pidOf(rank); }

void RankProcesses::stopAll() {
  poll_->stop();
  processes_->killAll();  // their ends are no failures now
}

} // namespace splitseg::ui
