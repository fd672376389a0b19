#include "ui/training/RankProcesses.h"
#include "ui/training/TrainingWorker.h"
#include "ui/session/RankHost.h"
#include "ui/session/Session.h"
#include "core/engine/Devices.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTimer>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>

namespace splitseg::ui {

RankProcesses::RankProcesses(QObject* parent) : QObject(parent) {}

RankProcesses::~RankProcesses() { stopAll(); }

QString RankProcesses::workerProgram() {
  const QString env = qEnvironmentVariable("SPLITSEG_CLI");
  if (!env.isEmpty()) return env;
  const QString beside = QDir(QCoreApplication::applicationDirPath()).filePath("splitseg-cli");
  if (QFileInfo(beside).isExecutable()) return beside;
  return QStandardPaths::findExecutable("splitseg-cli");
}

QString RankProcesses::start(const QList<int>& ranks, int port, int worldSize, int timeoutSeconds) {
  stopAll();
  ++generation_;
  const QString program = workerProgram();
  if (program.isEmpty()) return tr("splitseg-cli was not found beside the workstation or on PATH: it runs the ranks");
  // Ranks on one machine share its cores (as torchrun does): the workstation's rank and each
  // worker. The planner plans them with these threads.
  const int threads = engine::rankThreads(static_cast<int>(ranks.size()) + 1);
  for (const int rank : ranks) {
    auto* p = new QProcess(this);
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", QString::number(port));
    env.insert("RANK", QString::number(rank));
    env.insert("LOCAL_RANK", QString::number(rank));
    env.insert("WORLD_SIZE", QString::number(worldSize));
    env.insert("LOCAL_WORLD_SIZE", QString::number(ranks.size() + 1));
    env.insert("SPLITSEG_RANK_TIMEOUT", QString::number(timeoutSeconds));
    env.insert("OMP_NUM_THREADS", QString::number(threads));
    // c10d logs each lost connection with a stack trace; the ranks' one-line messages say it.
    if (!env.contains("TORCH_CPP_LOG_LEVEL")) env.insert("TORCH_CPP_LOG_LEVEL", "ERROR");
    p->setProcessEnvironment(env);
    p->setChildProcessModifier([] {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setpriority(PRIO_PROCESS, 0, TrainingWorker::kTrainingNice);  // below the UI, like rank 0's thread
    });
    connect(p, &QProcess::readyReadStandardError, this, [this, p, rank] {
      const auto lines = QString::fromUtf8(p->readAllStandardError()).split('\n', Qt::SkipEmptyParts);
      if (!lines.isEmpty()) lastLines_[rank] = lines.back().trimmed();
    });
    connect(p, &QProcess::finished, this, [this, p, rank](int code, QProcess::ExitStatus status) {
      if (processes_.value(rank) != p) return;
      processes_.remove(rank);
      const auto rest = QString::fromUtf8(p->readAllStandardError()).split('\n', Qt::SkipEmptyParts);
      if (!rest.isEmpty()) lastLines_[rank] = rest.back().trimmed();
      p->deleteLater();
      if (status == QProcess::NormalExit && code == 0) return;
      const QString how = status == QProcess::CrashExit ? tr("rank %1 was killed").arg(rank)
                                                         : tr("rank %1 exited with status %2").arg(rank).arg(code);
      const QString last = lastLines_.value(rank);
      Q_EMIT rankFailed(rank, last.isEmpty() ? how : how + ": " + last);
    });
    processes_[rank] = p;
    p->start(program, {"worker"});
    if (!p->waitForStarted(10000)) {
      const QString why = tr("rank %1 did not start (%2): %3").arg(rank).arg(program, p->errorString());
      stopAll();
      return why;
    }
  }
  return {};
}

QString RankProcesses::startForSession(const Session& session, int timeoutSeconds, dist::RankEnv& env,
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
  const int port = remote.isEmpty() ? dist::freeLocalPort() : session.rendezvousPort();
  if (port <= 0) return tr("No free port on 127.0.0.1 for the ranks' rendezvous");
  env.masterAddr = "127.0.0.1";
  env.masterPort = port;
  env.rank = 0;
  env.worldSize = world;
  env.localWorldSize = static_cast<int>(local.size()) + 1;  // rank 0 and the workers started here share its cores
  if (const QString why = start(local, port, world, timeoutSeconds); !why.isEmpty()) return why;
  QStringList lines;
  for (const auto& h : session.hosts())
    if (!h.local() && h.rank < world)
      lines << tr("on %1: %2").arg(QString::fromStdString(h.host),
                                   QString::fromStdString(workerCommand(QSysInfo::machineHostName().toStdString(), port,
                                                                        h.rank, world)));
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

int RankProcesses::running() const { return static_cast<int>(processes_.size()); }

qint64 RankProcesses::pidOf(int rank) const {
  const auto* p = processes_.value(rank);
  return p ? p->processId() : 0;
}

void RankProcesses::stopAll() {
  const auto all = processes_;
  processes_.clear();  // their finished signals are no failures now
  for (auto* p : all) {
    p->kill();
    p->waitForFinished(2000);
    p->deleteLater();
  }
}

} // namespace splitseg::ui
