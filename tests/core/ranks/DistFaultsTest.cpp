// Ranks that fail: one killed or frozen mid-run makes the others stop within the rank timeout with
// one line naming it, a non-zero exit and the last checkpoint intact; a bad rendezvous (port in
// use, wrong world size, a placement naming a rank that does not exist) is refused up front.
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {
QStringList runFlags(const QString& steps) {
  return {"--synthetic", "16", "--patch", "16", "--base", "4", "--depth", "3", "--batch", "2", "--steps", steps,
          "--seed", "3", "--progress", "jsonl"};
}
const char* kTwoRanks = "enc0=r0:cpu,enc1=r0:cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu";

// A socket listening on 127.0.0.1 at a free port (closed when destroyed unless released).
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 1) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~Listener() { close(); }
};

// Waits until `p`'s stderr names rank `rank`'s pid and its stdout shows `stepsSeen` steps (lines
// holding `marker`).
qint64 rankPid(QProcess& p, int rank, int stepsSeen, QByteArray& err, QByteArray& out,
               const QByteArray& marker = "\"step\"") {
  QElapsedTimer t;
  t.start();
  const QRegularExpression re(QString("rank %1 pid (\\d+)").arg(rank));
  qint64 pid = 0;
  while (t.elapsed() < 60000) {
    p.waitForReadyRead(200);
    err += p.readAllStandardError();
    out += p.readAllStandardOutput();
    const auto m = re.match(QString::fromUtf8(err));
    if (m.hasMatch()) pid = m.captured(1).toLongLong();
    if (pid > 0 && out.count(marker) >= stepsSeen) return pid;
  }
  return 0;
}
// Rank 1 killed, or frozen (SIGSTOP: the connection stays open), and what rank 0 then says.
void lostRankRows() {
  QTest::addColumn<int>("signal");
  QTest::addColumn<QString>("message");
  QTest::newRow("killed") << int(SIGKILL) << "rank 1 closed the connection";
  QTest::newRow("frozen") << int(SIGSTOP) << "no answer from rank 1 within 3 s";
}
} // namespace

class DistFaultsTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { qputenv("OMP_NUM_THREADS", "1"); }

  void rankLostMidRun_data() { lostRankRows(); }
  void rankLostMidRun() {
    QFETCH(int, signal);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString ckpt = dir.filePath("run.pt");
    QProcess p;
    p.start(SPLITSEG_CLI, QStringList{"launch", "--local-ranks", "2", "--rank-timeout", "3", "train"} +
                              runFlags("100000") +
                              QStringList{"--placement", kTwoRanks, "--checkpoint-every", "2", "--save", ckpt});
    QByteArray err, out;
    const qint64 pid = rankPid(p, 1, 3, err, out);
    QVERIFY2(pid > 0, err.constData());
    QVERIFY(QFile::exists(ckpt));  // written at step 2
    QElapsedTimer t;
    t.start();
    ::kill(static_cast<pid_t>(pid), signal);
    QVERIFY(p.waitForFinished(60000));
    err += p.readAllStandardError();
    const double seconds = t.elapsed() / 1000.0;
    qInfo("launcher ended %.1f s after rank 1 was %s", seconds, signal == SIGKILL ? "killed" : "frozen");
    if (signal == SIGSTOP) ::kill(static_cast<pid_t>(pid), SIGKILL);
    QVERIFY(p.exitCode() != 0);
    QVERIFY2(err.contains(message.toUtf8()), err.constData());
    QVERIFY2(err.contains("rank 0: "), err.constData());
    // Rank 0 stopped within its timeout (3 s) plus start-up slack, not at the launcher's kill.
    QVERIFY2(err.indexOf("launch: rank 0 exited with status 1") >= 0, err.constData());
    // The last checkpoint is intact: a one-process run resumes from it.
    QProcess resume;
    resume.start(SPLITSEG_CLI, {"train", "--resume", ckpt, "--steps", "1", "--progress", "none"});
    QVERIFY(resume.waitForFinished(60000));
    QVERIFY2(resume.exitCode() == 0 || resume.readAllStandardError().contains("steps"), "checkpoint unreadable");
  }

  // The same during sliding-window inference with windows in flight on both ranks (2 micro-batches
  // a pass): rank 0 stops within the rank timeout (3 s) and some slack, with the line naming rank 1
  // and a non-zero exit.
  void rankLostDuringInference_data() { lostRankRows(); }
  void rankLostDuringInference() {
    QFETCH(int, signal);
    QFETCH(QString, message);
    QProcess p;
    // 64^3 in 16^3 windows: 343 windows, far more than the test waits for.
    p.start(SPLITSEG_CLI, {"launch", "--local-ranks", "2", "--rank-timeout", "3", "infer", "--synthetic", "64", "--base",
                           "4", "--depth", "3", "--window", "16", "--micro-batches", "2", "--progress", "jsonl",
                           "--placement", kTwoRanks});
    QByteArray err, out;
    const qint64 pid = rankPid(p, 1, 3, err, out, "\"window ");
    QVERIFY2(pid > 0, err.constData());
    QElapsedTimer t;
    t.start();
    ::kill(static_cast<pid_t>(pid), signal);
    qint64 rankZeroDone = -1;
    while (t.elapsed() < 60000 && rankZeroDone < 0) {
      p.waitForReadyRead(100);
      err += p.readAllStandardError();
      if (err.contains("launch: rank 0 exited")) rankZeroDone = t.elapsed();
      if (p.state() == QProcess::NotRunning) break;
    }
    QVERIFY(p.waitForFinished(60000));
    err += p.readAllStandardError();
    qInfo("rank 0 ended %.1f s after rank 1 was %s", rankZeroDone / 1000.0, signal == SIGKILL ? "killed" : "frozen");
    if (signal == SIGSTOP) ::kill(static_cast<pid_t>(pid), SIGKILL);
    QVERIFY(p.exitCode() != 0);
    QVERIFY2(err.contains(message.toUtf8()), err.constData());
    QVERIFY2(err.indexOf("launch: rank 0 exited with status 1") >= 0, err.constData());
    QVERIFY2(rankZeroDone >= 0 && rankZeroDone < 8000, qPrintable(QString::number(rankZeroDone)));
  }

  void badRendezvous_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QString>("message");
    QTest::newRow("rank out of range") << "enc0=r0:cpu,head=r2:cpu" << 2 << "rank 2 does not exist (WORLD_SIZE=2";
    QTest::newRow("rank without stage") << "enc0=r0:cpu" << 2 << "rank 1 has no stage";
    QTest::newRow("device the rank lacks") << "enc0=r0:cpu,head=r1:cuda:7" << 2 << "placed on cuda:7, which this rank";
  }
  void badRendezvous() {
    QFETCH(QString, placement);
    QFETCH(int, ranks);
    QFETCH(QString, message);
    QProcess p;
    p.start(SPLITSEG_CLI, QStringList{"launch", "--local-ranks", QString::number(ranks), "--rank-timeout", "10",
                                      "train"} +
                              runFlags("2") + QStringList{"--placement", placement});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QVERIFY(p.exitCode() != 0);
    QVERIFY2(err.contains(message.toUtf8()), err.constData());
  }

  void portInUse() {
    Listener busy;
    QVERIFY(busy.port > 0);
    QProcess p;
    p.start(SPLITSEG_CLI, QStringList{"launch", "--local-ranks", "2", "--rank-timeout", "3", "--port",
                                      QString::number(busy.port), "train"} +
                              runFlags("2") + QStringList{"--placement", kTwoRanks});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray err = p.readAllStandardError();
    QVERIFY(p.exitCode() != 0);
    QVERIFY2(err.contains("rank 0: cannot listen on 127.0.0.1:"), err.constData());
  }

  void worldSizesDisagree() {
    Listener probe;  // a free port
    QVERIFY(probe.port > 0);
    const QString port = QString::number(probe.port);
    probe.close();
    auto env = [&](int rank, int world) {
      auto e = QProcessEnvironment::systemEnvironment();
      e.insert("SPLITSEG_RUN_SECRET", "DistFaultsTest's secret, 32 chars");
      e.insert("MASTER_ADDR", "127.0.0.1");
      e.insert("MASTER_PORT", port);
      e.insert("RANK", QString::number(rank));
      e.insert("WORLD_SIZE", QString::number(world));
      return e;
    };
    QProcess zero, one;
    zero.setProcessEnvironment(env(0, 2));
    one.setProcessEnvironment(env(1, 3));
    zero.start(SPLITSEG_CLI, QStringList{"train"} + runFlags("2") + QStringList{"--placement", kTwoRanks,
                                                                                "--rank-timeout", "5"});
    one.start(SPLITSEG_CLI, {"worker", "--rank-timeout", "5"});
    QVERIFY(zero.waitForFinished(60000));
    QVERIFY(one.waitForFinished(60000));
    const QByteArray e0 = zero.readAllStandardError(), e1 = one.readAllStandardError();
    QVERIFY(zero.exitCode() != 0);
    QVERIFY(one.exitCode() != 0);
    QVERIFY2(e0.contains("rank 1 has WORLD_SIZE=3, rank 0 has 2"), e0.constData());
    QVERIFY2(e1.contains("refused by rank 0"), e1.constData());
  }

  // A worker that cannot prove the run's secret is refused at rank 0's gate: rank 0 names its
  // address and, as the real rank never came, stops at the rank timeout; the worker says why.
  void workersWithoutTheSecretAreRefused_data() {
    QTest::addColumn<QString>("workerSecret");  // "" unset
    QTest::addColumn<QString>("workerLine");
    QTest::addColumn<QString>("zeroLine");  // "" rank 0 sees nothing of it
    QTest::newRow("wrong secret") << "not the secret of this run, 32 c"
                                  << "it refused this rank: the run secrets differ"
                                  << "rank 0: refused a connection from 127.0.0.1:";
    QTest::newRow("no secret") << "" << "rank 1: no run secret: set SPLITSEG_RUN_SECRET" << "";
  }
  void workersWithoutTheSecretAreRefused() {
    QFETCH(QString, workerSecret);
    QFETCH(QString, workerLine);
    QFETCH(QString, zeroLine);
    Listener probe;
    const QString port = QString::number(probe.port);
    probe.close();
    auto env = [&](int rank, const QString& secret) {
      auto e = QProcessEnvironment::systemEnvironment();
      e.remove("SPLITSEG_RUN_SECRET");
      e.remove("SPLITSEG_RUN_SECRET_FILE");
      if (!secret.isEmpty()) e.insert("SPLITSEG_RUN_SECRET", secret);
      e.insert("MASTER_ADDR", "127.0.0.1");
      e.insert("MASTER_PORT", port);
      e.insert("RANK", QString::number(rank));
      e.insert("WORLD_SIZE", "2");
      return e;
    };
    QProcess zero, one;
    zero.setProcessEnvironment(env(0, "DistFaultsTest's secret, 32 chars"));
    one.setProcessEnvironment(env(1, workerSecret));
    zero.start(SPLITSEG_CLI, QStringList{"train"} + runFlags("2") + QStringList{"--placement", kTwoRanks,
                                                                                "--rank-timeout", "4"});
    one.start(SPLITSEG_CLI, {"worker", "--rank-timeout", "4"});
    QVERIFY(zero.waitForFinished(60000));
    QVERIFY(one.waitForFinished(60000));
    const QByteArray e0 = zero.readAllStandardError(), e1 = one.readAllStandardError();
    QVERIFY(zero.exitCode() != 0);
    QVERIFY(one.exitCode() != 0);
    QVERIFY2(e1.contains(workerLine.toUtf8()), e1.constData());
    QVERIFY2(e0.contains("rank 1 did not join within 4 s"), e0.constData());
    if (!zeroLine.isEmpty()) {
      QVERIFY2(e0.contains(zeroLine.toUtf8()), e0.constData());
      QVERIFY2(e0.contains("it did not prove the run's secret"), e0.constData());
    }
  }
};

QTEST_GUILESS_MAIN(DistFaultsTest)
#include "DistFaultsTest.moc"
