// The one checked geometry path (core/volume/GeometryCheck.h): each row is a hostile grid
// and the words its refusal must contain.
#include "core/base/Error.h"
#include "core/volume/GeometryCheck.h"

#include <QtTest>
#include <algorithm>

#include <cmath>

using namespace splitseg;

class GeometryCheckTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void problems_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("fragment");  // "" = the grid is fine
    QTest::newRow("valid") << "valid" << "";
    QTest::newRow("zero size") << "zeroSize" << "must be positive";
    QTest::newRow("negative size") << "negSize" << "must be positive";
    QTest::newRow("overflowing size") << "overflow" << "overflows";
    QTest::newRow("beyond available memory") << "memory" << "available memory";
    QTest::newRow("NaN spacing") << "nanSpacing" << "spacing along y";
    QTest::newRow("zero spacing") << "zeroSpacing" << "spacing along x";
    QTest::newRow("tiny spacing") << "tinySpacing" << "spacing along z";
    QTest::newRow("Inf origin") << "infOrigin" << "origin along x";
    QTest::newRow("huge origin") << "hugeOrigin" << "origin along y";
    QTest::newRow("NaN direction") << "nanDirection" << "direction matrix holds";
    QTest::newRow("singular direction") << "singular" << "singular";
    QTest::newRow("zero direction") << "zeroDirection" << "singular";
  }
  void problems() {
    QFETCH(QString, kind);
    QFETCH(QString, fragment);
    Geometry g;
    g.size = {10, 20, 30};
    const std::string k = kind.toStdString();
    if (k == "zeroSize") g.size[1] = 0;
    if (k == "negSize") g.size[2] = -3;
    if (k == "overflow") g.size = {std::int64_t(1) << 32, std::int64_t(1) << 32, 2};
    if (k == "memory") {
      // Twice what the memory available now allows (the cap follows MemAvailable).
      const std::int64_t cap = voxelCap(4);
      g.size = {cap / (1 << 19) + 1, 1024, 1024};
    }
    if (k == "nanSpacing") g.spacing[1] = std::nan("");
    if (k == "zeroSpacing") g.spacing[0] = 0;
    if (k == "tinySpacing") g.spacing[2] = 1.6e-19;
    if (k == "infOrigin") g.origin[0] = INFINITY;
    if (k == "hugeOrigin") g.origin[1] = 1e300;
    if (k == "nanDirection") g.direction[5] = std::nan("");
    if (k == "singular") g.direction = {1, 0, 0, 1, 0, 0, 0, 0, 1};
    if (k == "zeroDirection") g.direction = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    const std::string p = geometryProblem(g);
    if (fragment.isEmpty()) {
      QVERIFY2(p.empty(), p.c_str());
      checkGeometry(g, "ctx");
      return;
    }
    QVERIFY2(p.find(fragment.toStdString()) != std::string::npos, p.c_str());
    try {
      checkGeometry(g, "ctx");
      QFAIL("no error");
    } catch (const InvalidArgument& e) {
      QVERIFY2(std::string(e.what()).rfind("ctx: ", 0) == 0, e.what());
      QVERIFY(std::string(e.what()).find('\n') == std::string::npos);
    }
  }

  void capFollowsAvailableMemory() {
    // Available memory moves while other processes run (a CI build beside this test freed memory
    // between two reads once): bound the cap by the larger of a reading before and after, plus
    // 1 GiB. Still far below the fixed 2^34-voxel ceiling on a machine with tens of GiB.
    const std::uint64_t before = availableMemoryBytes();
    QVERIFY(before > 0);
    const auto cap = static_cast<std::uint64_t>(voxelCap(4));
    const std::uint64_t after = availableMemoryBytes();
    QVERIFY2(cap <= (std::max(before, after) + (std::uint64_t{1} << 30)) / 4,
             qPrintable(QString("cap %1 voxels, available %2 / %3 bytes").arg(cap).arg(before).arg(after)));
    QVERIFY(voxelCap(8) <= voxelCap(4));
    QVERIFY(voxelCap(1) <= (std::int64_t(1) << 34));
  }

  void axisSizesFromFloats_data() {
    QTest::addColumn<double>("value");
    QTest::addColumn<bool>("ok");
    QTest::newRow("64") << 64.0 << true;
    QTest::newRow("NaN") << std::nan("") << false;
    QTest::newRow("Inf") << double(INFINITY) << false;
    QTest::newRow("-1") << -1.0 << false;
    QTest::newRow("0") << 0.0 << false;
    QTest::newRow("2.5") << 2.5 << false;
    QTest::newRow("2^40") << std::ldexp(1.0, 40) << false;
  }
  void axisSizesFromFloats() {
    QFETCH(double, value);
    QFETCH(bool, ok);
    std::int64_t out = -7;
    QCOMPARE(toAxisSize(value, out), ok);
    if (ok) QCOMPARE(out, static_cast<std::int64_t>(value));
    else QCOMPARE(out, std::int64_t(-7));
  }
};

QTEST_GUILESS_MAIN(GeometryCheckTest)
#include "GeometryCheckTest.moc"
