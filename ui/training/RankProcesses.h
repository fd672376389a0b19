#pragma once
// The rank processes a run over ranks starts on this machine: `splitseg-cli worker` started by the
// one local-rank launcher (ranks::LocalRankProcesses, as `splitseg-cli launch` starts its ranks),
// joining the rendezvous the workstation (rank 0) serves. A rank that exits with an error is reported with its last line; the
// processes die with the workstation (no orphan keeps training).
#include <QList>
#include <QMap>
#include <QObject>
#include <QString>

#include "core/ranks/LocalRanks.h"
#include "core/ranks/RankEnv.h"

#include <memory>
#include <string>

class QTimer;

namespace splitseg::ui {

class Session;

class RankProcesses : public QObject {
  Q_OBJECT
public:
  explicit RankProcesses(QObject* parent = nullptr);
  ~RankProcesses() override;

  // Starts one worker per rank in `ranks` (each > 0); "" or why one could not start (the others
  // are then stopped).
  QString start(const QList<int>& ranks, int port, int worldSize, int timeoutSeconds, const std::string& secret);
  // The run ended: workers normally exit by themselves right after; those still running after
  // `graceMs` are killed. Does not block.
  void finish(int graceMs);
  // A run over the session's ranks ended (with `error`, "" when none): finish(5000), and the rank
  // the runtime's error names ("rank 0: rank 2 closed the connection ...") gets it on its column
  // unless it already has a problem. Training, review and dataset evaluation alike.
  void endRun(Session& session, const QString& error);
  // A run over the ranks the session's placement names, with this process as rank 0 (training
  // or review): starts the workers on this machine and fills `env` (a free port on 127.0.0.1, or
  // the session's rendezvous port when a host is remote) and `joinHint` (the command each remote
  // host runs, empty when none). "" or why the run cannot start (a rank no host provides, no
  // free port, a worker that did not start).
  QString startForSession(const Session& session, int timeoutSeconds, ranks::RankEnv& env, std::string& joinHint);
  int running() const;
  qint64 pidOf(int rank) const;  // 0 when not running

  // The rank a run's error names first other than 0 ("rank 0: rank 2 closed the connection ..."
  // -> 2), so its column can show it; 0 when none.
  static int rankNamedIn(const QString& error);
  // SPLITSEG_CLI when set, else splitseg-cli beside this program, else the one on PATH.
  static QString workerProgram();

Q_SIGNALS:
  // A worker ended with a non-zero status or a signal; `lastLine` is its last line on stderr.
  void rankFailed(int rank, const QString& why);

private:
  void stopAll();
  void pollEnded();  // rankFailed for each worker that ended with an error

  std::unique_ptr<ranks::LocalRankProcesses> processes_;  // the one local-rank launcher
  QTimer* poll_;
  int generation_ = 0;  // one per start()
};

} // namespace splitseg::ui
