// Largest component per label: boxes of labels drawn into a volume, the regions counted and only
// the largest of each label left, compared with what the drawing says must survive.
#include "core/base/Error.h"
#include "core/postprocess/LargestComponent.h"

#include <QtTest>

using namespace splitseg;

namespace {
struct Box {
  int label, x, y, z, edge;
  bool survives;
};
// "label x y z edge survives(1/0)" separated by ';'
std::vector<Box> boxes(const QString& s) {
  std::vector<Box> out;
  for (const auto& part : s.split(';', Qt::SkipEmptyParts)) {
    const auto f = part.split(' ', Qt::SkipEmptyParts);
    out.push_back({f[0].toInt(), f[1].toInt(), f[2].toInt(), f[3].toInt(), f[4].toInt(), f[5] == "1"});
  }
  return out;
}
} // namespace

class LargestComponentTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void keepsTheLargest_data() {
    QTest::addColumn<QString>("drawn");
    QTest::addColumn<QString>("expected");  // "label components kept removed" per label, ';'
    QTest::newRow("two blobs") << "1 2 2 2 3 1; 1 10 10 10 2 0" << "1 2 27 8";
    QTest::newRow("corner contact is one region (26-connected)")
        << "1 2 2 2 2 1; 1 4 4 4 1 1; 1 12 3 3 1 0" << "1 2 9 1";
    QTest::newRow("a one-voxel gap separates") << "1 2 2 2 3 1; 1 6 2 2 2 0" << "1 2 27 8";
    QTest::newRow("labels apart, touching each other")
        << "1 2 2 2 3 1; 2 5 2 2 2 1; 2 12 12 12 1 0" << "1 1 27 0; 2 2 8 1";
    QTest::newRow("a tie keeps the first met (lowest z)") << "1 9 9 9 2 0; 1 2 2 2 2 1" << "1 2 8 8";
    QTest::newRow("label 255") << "255 1 1 1 2 1; 255 9 9 9 1 0" << "255 2 8 1";
    QTest::newRow("background only") << "" << "";
  }
  void keepsTheLargest() {
    QFETCH(QString, drawn);
    QFETCH(QString, expected);
    Geometry g;
    g.size = {16, 15, 14};
    Volume v(g, 0.0f);
    const auto drawnBoxes = boxes(drawn);
    for (const auto& b : drawnBoxes)
      for (int z = b.z; z < b.z + b.edge; ++z)
        for (int y = b.y; y < b.y + b.edge; ++y)
          for (int x = b.x; x < b.x + b.edge; ++x) v.at(x, y, z) = static_cast<float>(b.label);
    const auto report = postprocess::keepLargestComponents(v);
    QStringList got;
    for (const auto& r : report) got << QString("%1 %2 %3 %4").arg(r.label).arg(r.components).arg(r.kept).arg(r.removed);
    QCOMPARE(got.join("; "), expected);
    // Every voxel of a surviving box keeps its label; every voxel of the others is background.
    for (const auto& b : drawnBoxes)
      for (int z = b.z; z < b.z + b.edge; ++z)
        for (int y = b.y; y < b.y + b.edge; ++y)
          for (int x = b.x; x < b.x + b.edge; ++x)
            QCOMPARE(v.at(x, y, z), b.survives ? static_cast<float>(b.label) : 0.0f);
  }

  void refusesWhatIsNotALabel_data() {
    QTest::addColumn<float>("value");
    QTest::newRow("fraction") << 1.5f;
    QTest::newRow("negative") << -1.0f;
    QTest::newRow("above 255") << 256.0f;
    QTest::newRow("NaN") << std::numeric_limits<float>::quiet_NaN();
  }
  void refusesWhatIsNotALabel() {
    QFETCH(float, value);
    Geometry g;
    g.size = {4, 4, 4};
    Volume v(g, 0.0f);
    v.at(1, 2, 3) = value;
    v.at(0, 0, 0) = 1.0f;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, postprocess::keepLargestComponents(v));
    QCOMPARE(v.at(0, 0, 0), 1.0f);  // nothing changed
  }
};

QTEST_GUILESS_MAIN(LargestComponentTest)
#include "LargestComponentTest.moc"
