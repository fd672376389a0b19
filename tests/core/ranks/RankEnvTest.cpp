// torchrun's and Slurm's environments read into a RankEnv: the ranks on this host (LOCAL_WORLD_SIZE)
// decide the threads rank 0 computes with; Slurm's compact host list gives the master; the run
// secret comes from the environment or a file only its owner reads; bad values are refused
// naming the variable.
#include "core/base/Error.h"
#include "core/ranks/RankEnv.h"

#include <QTemporaryDir>
#include <sys/stat.h>

#include <QtTest>

using namespace splitseg;

class RankEnvTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void readsTheEnvironment_data() {
    QTest::addColumn<QString>("world");
    QTest::addColumn<QString>("rank");
    QTest::addColumn<QString>("local");  // LOCAL_WORLD_SIZE; "": unset
    QTest::addColumn<int>("onThisHost");  // -1: refused
    QTest::addColumn<QString>("error");
    QTest::newRow("one process") << "" << "" << "" << 1 << "";
    QTest::newRow("all on one host, unsaid") << "3" << "0" << "" << 3 << "";
    QTest::newRow("two of four here") << "4" << "0" << "2" << 2 << "";
    QTest::newRow("alone here") << "4" << "0" << "1" << 1 << "";
    QTest::newRow("more here than in the world") << "2" << "0" << "3" << -1 << "LOCAL_WORLD_SIZE=3 is more than WORLD_SIZE=2";
    QTest::newRow("not a number") << "2" << "1" << "two" << -1 << "LOCAL_WORLD_SIZE=two";
    QTest::newRow("rank past the world") << "2" << "2" << "" << -1 << "RANK=2 is not below WORLD_SIZE=2";
  }
  void readsTheEnvironment() {
    QFETCH(QString, world);
    QFETCH(QString, rank);
    QFETCH(QString, local);
    QFETCH(int, onThisHost);
    QFETCH(QString, error);
    const char* names[] = {"WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE"};
    const QString values[] = {world, rank, local};
    for (int i = 0; i < 3; ++i) {
      if (values[i].isEmpty()) qunsetenv(names[i]);
      else qputenv(names[i], values[i].toUtf8());
    }
    std::string what;
    ranks::RankEnv env;
    try {
      env = ranks::RankEnv::fromEnvironment();
    } catch (const InvalidArgument& e) {
      what = e.what();
    }
    for (const char* n : names) qunsetenv(n);
    if (onThisHost < 0) {
      QVERIFY2(what.find(error.toStdString()) != std::string::npos, what.c_str());
      return;
    }
    QVERIFY2(what.empty(), what.c_str());
    QCOMPARE(env.ranksOnThisHost(), onThisHost);
  }

  void slurmHostLists_data() {
    QTest::addColumn<QString>("list");
    QTest::addColumn<QString>("hosts");  // space-separated; "!text": refused with text
    QTest::newRow("one host") << "node7" << "node7";
    QTest::newRow("plain list") << "a,b,c" << "a b c";
    QTest::newRow("range with zeros") << "gpu[01-03]" << "gpu01 gpu02 gpu03";
    QTest::newRow("ranges and singles") << "gpu[1,3-4],login" << "gpu1 gpu3 gpu4 login";
    QTest::newRow("two groups") << "r[1-2]-n[1-2]" << "r1-n1 r1-n2 r2-n1 r2-n2";
    QTest::newRow("suffix") << "n[8-9].cluster" << "n8.cluster n9.cluster";
    QTest::newRow("unbalanced") << "gpu[1-2" << "!unbalanced brackets";
    QTest::newRow("nested") << "gpu[[1]]" << "!unbalanced brackets";
    QTest::newRow("backwards range") << "gpu[5-2]" << "!is not a whole number in 5..";
    QTest::newRow("letters") << "gpu[a-b]" << "!a host range=a";
  }
  void slurmHostLists() {
    QFETCH(QString, list);
    QFETCH(QString, hosts);
    QString got;
    try {
      for (const auto& h : ranks::expandSlurmHostList(list.toStdString())) got += (got.isEmpty() ? "" : " ") + QString::fromStdString(h);
    } catch (const InvalidArgument& e) {
      got = "!" + QString::fromUtf8(e.what());
    }
    if (hosts.startsWith('!')) {
      QVERIFY2(got.startsWith("!SLURM_JOB_NODELIST=") && got.contains(hosts.mid(1)), qPrintable(got));
      return;
    }
    QCOMPARE(got, hosts);
  }

  void slurmTasksPerNode_data() {
    QTest::addColumn<QString>("tasks");
    QTest::addColumn<int>("node");
    QTest::addColumn<int>("here");
    QTest::newRow("uniform, first") << "2(x3)" << 0 << 2;
    QTest::newRow("uniform, last") << "2(x3)" << 2 << 2;
    QTest::newRow("past the nodes") << "2(x3)" << 3 << 0;
    QTest::newRow("mixed") << "4(x2),1" << 2 << 1;
    QTest::newRow("plain") << "3,1" << 1 << 1;
  }
  void slurmTasksPerNode() {
    QFETCH(QString, tasks);
    QFETCH(int, node);
    QFETCH(int, here);
    QCOMPARE(ranks::slurmTasksOnNode(tasks.toStdString(), node), here);
  }

  // srun with no wrapper: Slurm's variables alone make the rank, the world, the master and a port
  // every task derives alike; torchrun's, when set, win.
  void launchersEnvironments_data() {
    QTest::addColumn<QStringList>("vars");  // NAME=value
    QTest::addColumn<QString>("expect");    // "launcher rank/world local master:port agent"
    QTest::newRow("srun, second task")
        << QStringList{"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_LOCALID=1", "SLURM_NODEID=0",
                       "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_JOB_NODELIST=gpu[07-08]", "SLURM_JOB_ID=123456"}
        << "slurm 1/4 2 gpu07:18456 0";
    QTest::newRow("srun, MASTER_ADDR given")
        << QStringList{"SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_NODEID=1", "SLURM_TASKS_PER_NODE=2(x2)",
                       "SLURM_JOB_NODELIST=gpu[07-08]", "MASTER_ADDR=10.0.0.9", "MASTER_PORT=29999"}
        << "slurm 3/4 2 10.0.0.9:29999 0";
    QTest::newRow("torchrun inside a Slurm job")
        << QStringList{"SLURM_PROCID=0", "SLURM_NTASKS=1", "RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=1",
                       "MASTER_ADDR=hostA", "MASTER_PORT=29400", "TORCHELASTIC_RUN_ID=x",
                       "TORCHELASTIC_USE_AGENT_STORE=True"}
        << "torchrun 1/2 1 hostA:29400 1";
    QTest::newRow("plain environment") << QStringList{"RANK=0", "WORLD_SIZE=2"} << "environment 0/2 2 127.0.0.1:29500 0";
  }
  void launchersEnvironments() {
    QFETCH(QStringList, vars);
    QFETCH(QString, expect);
    const char* all[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE",
                         "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "RANK", "WORLD_SIZE",
                         "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                         "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"};
    for (const char* n : all) qunsetenv(n);
    for (const auto& v : vars) qputenv(v.section('=', 0, 0).toUtf8(), v.section('=', 1).toUtf8());
    const auto e = ranks::RankEnv::fromEnvironment();
    for (const char* n : all) qunsetenv(n);
    const QString got = QString("%1 %2/%3 %4 %5:%6 %7")
                            .arg(QString::fromStdString(e.launcher))
                            .arg(e.rank)
                            .arg(e.worldSize)
                            .arg(e.ranksOnThisHost())
                            .arg(QString::fromStdString(e.masterAddr))
                            .arg(e.masterPort)
                            .arg(e.agentStore ? 1 : 0);
    QCOMPARE(got, expect);
  }

  void runSecrets_data() {
    QTest::addColumn<QString>("given");  // SPLITSEG_RUN_SECRET; "" unset
    QTest::addColumn<QString>("file");    // what SPLITSEG_RUN_SECRET_FILE holds; "" no file
    QTest::addColumn<int>("mode");
    QTest::addColumn<QString>("expect");  // the secret, or "!text" refused
    const QString good = "0123456789abcdef0123";
    QTest::newRow("none") << "" << "" << 0600 << "";
    QTest::newRow("inline") << good << "" << 0600 << good;
    QTest::newRow("inline too short") << "short" << "" << 0600 << "!holds 5 characters; a run secret needs at least 16";
    QTest::newRow("file, owner only") << "" << good + "\n" << 0600 << good;
    QTest::newRow("file others read") << "" << good << 0644 << "!can be read by other users (chmod 600 it)";
    QTest::newRow("inline wins") << good << "ignored-ignored-ignored" << 0644 << good;
  }
  void runSecrets() {
    QFETCH(QString, given);
    QFETCH(QString, file);
    QFETCH(int, mode);
    QFETCH(QString, expect);
    QTemporaryDir dir;
    const QString path = dir.filePath("secret");
    qunsetenv("SPLITSEG_RUN_SECRET");
    qunsetenv("SPLITSEG_RUN_SECRET_FILE");
    if (!given.isEmpty()) qputenv("SPLITSEG_RUN_SECRET", given.toUtf8());
    if (!file.isEmpty()) {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(file.toUtf8());
      f.close();
      QCOMPARE(::chmod(path.toLocal8Bit().constData(), static_cast<mode_t>(mode)), 0);
      qputenv("SPLITSEG_RUN_SECRET_FILE", path.toUtf8());
    }
    QString got;
    try {
      got = QString::fromStdString(ranks::RankEnv::fromEnvironment().secret);
    } catch (const InvalidArgument& e) {
      got = "!" + QString::fromUtf8(e.what());
    }
    qunsetenv("SPLITSEG_RUN_SECRET");
    qunsetenv("SPLITSEG_RUN_SECRET_FILE");
    if (expect.startsWith('!')) {
      QVERIFY2(got.startsWith("!SPLITSEG_RUN_SECRET") && got.contains(expect.mid(1)), qPrintable(got));
      return;
    }
    QCOMPARE(got, expect);
  }
};

QTEST_GUILESS_MAIN(RankEnvTest)
#include "RankEnvTest.moc"
