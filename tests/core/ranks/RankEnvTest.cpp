// torchrun's environment read into a RankEnv: the ranks on this host (LOCAL_WORLD_SIZE) decide the
// threads rank 0 computes with; bad values are refused naming the variable.
#include "core/base/Error.h"
#include "core/ranks/RankEnv.h"

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
};

QTEST_GUILESS_MAIN(RankEnvTest)
#include "RankEnvTest.moc"
