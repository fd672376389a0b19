// The cuDNN/torch version rule for 3D convolutions (a pure function), version decoding, and the
// device list's allowance fields (measured only on present CUDA devices), and the patch a
// device's training speed is measured at.
#include "core/engine/DeviceSpeed.h"
#include "core/engine/Devices.h"
#include "core/engine/PlannerDevices.h"
#include "core/engine/MemoryMeter.h"

#include <ATen/Parallel.h>
#include <QtTest>

#include <unistd.h>

using namespace splitseg;

class DevicesTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void cudnnVersionDecoding_data() {
    QTest::addColumn<int>("value");
    QTest::addColumn<QString>("expected");
    QTest::newRow("9.15.0") << 91500 << "9.15.0";
    QTest::newRow("9.10.2") << 91002 << "9.10.2";
    QTest::newRow("9.1.0") << 90100 << "9.1.0";
    QTest::newRow("8.9.7 (old encoding)") << 8907 << "8.9.7";
  }
  void cudnnVersionDecoding() {
    QFETCH(int, value);
    QFETCH(QString, expected);
    QCOMPARE(QString::fromStdString(engine::cudnnVersionFromInt(value).str()), expected);
  }

  void conv3dWarnings_data() {
    QTest::addColumn<QString>("torch");
    QTest::addColumn<QString>("cudnn");
    QTest::addColumn<QStringList>("mentions");  // one entry per expected warning (text it contains)
    QTest::newRow("2.9.1 + 9.10.2: both") << "2.9.1+cu128" << "9.10.2" << QStringList{"2.9.1", "9.10.2"};
    QTest::newRow("2.9.0 + 9.14.9: regression") << "2.9.0" << "9.14.9" << QStringList{"9.14.9"};
    QTest::newRow("2.9.1 + 9.15.0: fixed") << "2.9.1" << "9.15.0" << QStringList{};
    QTest::newRow("2.8.0 + 9.7.1: clean") << "2.8.0" << "9.7.1" << QStringList{};
    QTest::newRow("2.8.0 + 9.8.0: bf16 first bad") << "2.8.0" << "9.8.0" << QStringList{"9.8.0"};
    QTest::newRow("2.10.0 + 9.10.9: bf16 last bad") << "2.10.0" << "9.10.9" << QStringList{"9.10.9"};
    QTest::newRow("2.10.0 + 9.11.0: clean") << "2.10.0" << "9.11.0" << QStringList{};
    QTest::newRow("2.11.0 + 9.13.0: clean") << "2.11.0" << "9.13.0" << QStringList{};
    QTest::newRow("2.19.0 + 9.1.0: only 2.9.x") << "2.19.0" << "9.1.0" << QStringList{};
  }
  void conv3dWarnings() {
    QFETCH(QString, torch);
    QFETCH(QString, cudnn);
    QFETCH(QStringList, mentions);
    const auto w = engine::conv3dVersionWarnings(engine::parseVersion(torch.toStdString()),
                                                 engine::parseVersion(cudnn.toStdString()));
    QCOMPARE(int(w.size()), int(mentions.size()));
    for (int i = 0; i < mentions.size(); ++i)
      QVERIFY2(QString::fromStdString(w[std::size_t(i)]).contains(mentions[i]), w[std::size_t(i)].c_str());
  }

  void parseVersionStopsAtSuffix() {
    const auto v = engine::parseVersion("2.11.0+cu130");
    QCOMPARE(v.major, 2);
    QCOMPARE(v.minor, 11);
    QCOMPARE(v.patch, 0);
  }

  // CPU: never measured, planner default (-1). CUDA devices: a measurement or a reason.
  void allowances() {
    for (const auto& d : engine::detectDevices()) {
      if (d.name == "cpu") {
        QCOMPARE(d.allowanceBytes, std::int64_t{-1});
        continue;
      }
      QVERIFY2(!d.cuda.method.empty(), d.name.c_str());
      if (d.cuda.measured()) {
        QCOMPARE(d.allowanceBytes, d.cuda.contextBytes + d.cuda.workspaceBytes);
        QVERIFY2(d.cuda.contextBytes > (std::int64_t{16} << 20), "a CUDA context takes more than 16 MiB");
        QVERIFY(d.cuda.contextBytes < d.totalBytes / 4);
      }
    }
    if (!engine::cudaAvailable()) QCOMPARE(engine::cudaAllowance(0).measured(), false);
  }

  // Ranks on one host share its cores unless OMP_NUM_THREADS says otherwise, and the planner plans
  // each CPU rank with the threads it will run (rank 0 as `launch` starts it when this process is no rank).
  void rankThreads_data() {
    QTest::addColumn<QString>("omp");  // "": unset
    QTest::addColumn<int>("ranks");
    const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    QTest::addColumn<int>("expected");
    QTest::newRow("unset, 2 ranks") << "" << 2 << std::max(1, cores / 2);
    QTest::newRow("unset, more ranks than cores") << "" << cores + 1 << 1;
    QTest::newRow("OMP_NUM_THREADS=3") << "3" << 2 << 3;
    QTest::newRow("OMP_NUM_THREADS unreadable") << "many" << 1 << cores;
  }
  void rankThreads() {
    QFETCH(QString, omp);
    QFETCH(int, ranks);
    QFETCH(int, expected);
    const QByteArray saved = qgetenv("OMP_NUM_THREADS");
    const bool had = qEnvironmentVariableIsSet("OMP_NUM_THREADS");
    if (omp.isEmpty()) qunsetenv("OMP_NUM_THREADS");
    else qputenv("OMP_NUM_THREADS", omp.toUtf8());
    qunsetenv("RANK");
    QCOMPARE(engine::rankThreads(ranks), expected);
    // Three ranks named by a placement: every CPU rank planned with rankThreads(3).
    const auto names = std::vector<std::string>{"enc0", "head"};
    const auto placement = placement::Placement::parse("enc0=r0:cpu,head=r2:cpu", names, "cpu");
    // Rank 0 too (the workstation or `launch`'s rank 0 runs with rankThreads: RankRun.cpp).
    auto devices = engine::plannerDevices(placement);
    QStringList cpus;
    for (const auto& d : devices) {
      if (d.isCuda()) continue;
      cpus << QString::fromStdString(d.name);
      QCOMPARE(d.cpuThreads, engine::rankThreads(3));
    }
    QCOMPARE(cpus, (QStringList{"cpu", "r0:cpu", "r2:cpu"}));
    // A rank device the list already holds (the workstation's session declares its ranks) too.
    std::vector<planner::DeviceSpec> declared{{"r2:cpu", std::int64_t{1} << 30}};
    engine::addPlacedDevices(declared, placement);
    QCOMPARE(declared.front().cpuThreads, engine::rankThreads(3));
    // Rank 2 on another machine: ranks 0 and 1 share this host (rankThreads(2)); rank 2 keeps what
    // it was given (the threads of its own host are not this one's to share).
    const auto three = placement::Placement::parse("enc0=r1:cpu,head=r2:cpu", names, "cpu");
    std::vector<planner::DeviceSpec> split{{"cpu", std::int64_t{1} << 30}, {"r2:cpu", std::int64_t{1} << 30}};
    split[1].cpuThreads = 7;
    engine::addPlacedDevices(split, three, {2});
    QCOMPARE(split.size(), std::size_t(3));  // r1:cpu added
    for (const auto& d : split)
      QCOMPARE(d.cpuThreads, d.name == "r2:cpu" ? 7 : engine::rankThreads(2));
    // Without ranks, this process's threads.
    auto alone = engine::plannerDevices(placement::Placement::uniform(names, "cpu"));
    for (const auto& d : alone)
      if (!d.isCuda()) QCOMPARE(d.cpuThreads, at::get_num_threads());
    if (had) qputenv("OMP_NUM_THREADS", saved);
    else qunsetenv("OMP_NUM_THREADS");
  }

  // The planned patch itself up to kMeasureVoxels; beyond, the planned shape scaled down, each
  // side a multiple of the network's size divisor.
  void measurementPatch_data() {
    QTest::addColumn<QList<qint64>>("planned");
    QTest::addColumn<int>("divisor");
    QTest::addColumn<QList<qint64>>("expected");
    QTest::newRow("small: as planned") << QList<qint64>{32, 48, 16} << 8 << QList<qint64>{32, 48, 16};
    QTest::newRow("96^3: as planned") << QList<qint64>{96, 96, 96} << 16 << QList<qint64>{96, 96, 96};
    QTest::newRow("128^3 -> 96^3") << QList<qint64>{128, 128, 128} << 8 << QList<qint64>{96, 96, 96};
    QTest::newRow("CT slab 512x512x200 keeps its shape") << QList<qint64>{512, 512, 200} << 16 << QList<qint64>{128, 128, 48};
    QTest::newRow("never below the divisor") << QList<qint64>{4096, 16, 16} << 16 << QList<qint64>{3856, 16, 16};
  }
  void measurementPatch() {
    QFETCH(QList<qint64>, planned);
    QFETCH(int, divisor);
    QFETCH(QList<qint64>, expected);
    const auto got = engine::measurementPatch({planned[0], planned[1], planned[2]}, divisor);
    QCOMPARE((QList<qint64>{got[0], got[1], got[2]}), expected);
    QVERIFY(got[0] * got[1] * got[2] <= std::max<qint64>(engine::kMeasureVoxels, planned[0] * planned[1] * planned[2]));
  }
};

QTEST_GUILESS_MAIN(DevicesTest)
#include "DevicesTest.moc"
