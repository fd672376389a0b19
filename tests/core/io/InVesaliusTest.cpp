// InVesalius .inv3 import: a synthetic project built here (exact), malformed archives,
// and the real Cranium.inv3 when Debian's invesalius-examples is installed.
#include "core/base/Error.h"
#include "core/io/InVesalius.h"

#include <QTemporaryDir>
#include <QtTest>

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <map>

using namespace splitseg;

namespace {

void writeTarGz(const std::string& path, const std::vector<std::pair<std::string, std::string>>& files) {
  gzFile f = gzopen(path.c_str(), "wb");
  for (const auto& [name, data] : files) {
    char h[512] = {};
    std::snprintf(h, 100, "tmpdir/%s", name.c_str());
    std::snprintf(h + 100, 8, "0000644");
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(data.size()));
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 5);
    gzwrite(f, h, 512);
    gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
    const std::string pad((512 - data.size() % 512) % 512, '\0');
    gzwrite(f, pad.data(), static_cast<unsigned>(pad.size()));
  }
  const std::string end(1024, '\0');
  gzwrite(f, end.data(), static_cast<unsigned>(end.size()));
  gzclose(f);
}

const char* mainPlist =
    "<plist><dict><key>matrix</key><dict><key>dtype</key><string>int16</string><key>filename</key>"
    "<string>matrix.dat</string><key>shape</key><array><integer>2</integer><integer>3</integer>"
    "<integer>4</integer></array></dict><key>modality</key><string>CT</string><key>name</key><string>toy</string>"
    "<key>spacing</key><array><real>0.5</real><real>0.75</real><real>2.5</real></array></dict></plist>";
const char* maskPlist =
    "<plist><dict><key>mask_file</key><string>mask_0.dat</string><key>mask_shape</key><array><integer>3</integer>"
    "<integer>4</integer><integer>5</integer></array><key>name</key><string>bone</string>"
    "<key>threshold_range</key><array><integer>226</integer><integer>3071</integer></array></dict></plist>";

std::string matrix() {  // 4x3x2 int16 LE, value = index*37 - 300
  std::string m;
  for (int i = 0; i < 24; ++i) {
    const std::int16_t v = static_cast<std::int16_t>(i * 37 - 300);
    m.push_back(static_cast<char>(v & 0xff));
    m.push_back(static_cast<char>((v >> 8) & 0xff));
  }
  return m;
}

std::string mask() {  // 5x4x3 with border; interior voxel (x,y,z) is 255 when x+y+z is even
  std::string m(60, '\0');
  for (int z = 0; z < 3; ++z)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x) {
        const std::size_t i = static_cast<std::size_t>((z * 4 + y) * 5 + x);
        if (x == 0 || y == 0 || z == 0) m[i] = 1;  // border flags must not leak in
        else if ((x + y + z - 3) % 2 == 0) m[i] = static_cast<char>(255);
      }
  return m;
}

} // namespace

class InVesaliusTest : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string path(const std::string& n) { return (tmp_.path() + "/" + QString::fromStdString(n)).toStdString(); }

private Q_SLOTS:
  void synthetic() {
    const std::string p = path("toy.inv3");
    writeTarGz(p, {{"main.plist", mainPlist}, {"matrix.dat", matrix()}, {"mask_0.plist", maskPlist}, {"mask_0.dat", mask()}});
    const auto proj = io::readInVesalius(p);
    QCOMPARE(proj.name, std::string("toy"));
    const auto& g = proj.image.geometry();
    QCOMPARE(g.size, (std::array<std::int64_t, 3>{4, 3, 2}));
    QCOMPARE(g.spacing, (std::array<double, 3>{0.5, 0.75, 2.5}));
    for (int i = 0; i < 24; ++i) QCOMPARE(proj.image.voxels()[i], float(i * 37 - 300));
    QCOMPARE(proj.masks.size(), std::size_t(1));
    QCOMPARE(proj.masks[0].thresholdLow, 226.0);
    const Volume& m = proj.masks[0].mask;
    for (int z = 0; z < 2; ++z)
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 4; ++x) QCOMPARE(m.at(x, y, z), (x + y + z) % 2 == 0 ? 1.0f : 0.0f);
  }

  void malformed_data() {
    QTest::addColumn<int>("kind");
    QTest::addColumn<QString>("fragment");
    QTest::newRow("not gzip") << 0 << "";
    QTest::newRow("matrix too short") << 1 << "";
    QTest::newRow("no main.plist") << 2 << "";
    QTest::newRow("mask wrong size") << 3 << "";
    // Issue 15: shapes that wrap, non-finite spacing, sizes claimed but not present.
    QTest::newRow("shape wraps to 0 voxels") << 4 << "shape";
    QTest::newRow("NaN spacing") << 5 << "spacing";
    QTest::newRow("member claims 68 GiB") << 6 << "claims";
    QTest::newRow("300k-digit number") << 7 << "spacing";
    QTest::newRow("negative shape") << 8 << "shape";
  }
  void malformed() {
    QFETCH(int, kind);
    QFETCH(QString, fragment);
    const std::string p = path("bad" + std::to_string(kind) + ".inv3");
    std::string mat = matrix(), msk = mask();
    std::string plist = mainPlist;
    auto swap = [&](const std::string& from, const std::string& to) { plist.replace(plist.find(from), from.size(), to); };
    if (kind == 4) { swap("<integer>2</integer><integer>3</integer>", "<integer>4294967296</integer><integer>4294967296</integer>"); swap("<integer>4</integer>", "<integer>1</integer>"); mat.clear(); }
    if (kind == 5) swap("<real>0.5</real>", "<real>nan</real>");
    if (kind == 7) swap("<real>0.5</real>", "<real>" + std::string(300000, '1') + "</real>");
    if (kind == 8) swap("<integer>2</integer>", "<integer>-4</integer>");
    if (kind == 6) {
      // A tar header whose 12-digit octal size claims 68 GiB, followed by a few bytes.
      gzFile f = gzopen(p.c_str(), "wb");
      char h[512] = {};
      std::snprintf(h, 100, "tmpdir/matrix.dat");
      std::memcpy(h + 124, "777777777777", 12);
      h[156] = '0';
      std::memcpy(h + 257, "ustar", 5);
      gzwrite(f, h, 512);
      gzwrite(f, "abcd", 4);
      gzclose(f);
    }
    if (kind == 0) { FILE* f = std::fopen(p.c_str(), "wb"); std::fputs("plain text, not an archive", f); std::fclose(f); }
    if (kind == 1) mat.resize(mat.size() - 2);
    if (kind == 3) msk.resize(msk.size() - 5);
    if (kind != 0 && kind != 6) {
      std::vector<std::pair<std::string, std::string>> files{{"matrix.dat", mat}, {"mask_0.plist", maskPlist}, {"mask_0.dat", msk}};
      if (kind != 2) files.push_back({"main.plist", plist});
      writeTarGz(p, files);
    }
    try {
      io::readInVesalius(p);
      QFAIL("no error");
    } catch (const FormatError& e) {
      QCOMPARE(e.path(), p);
      QVERIFY2(std::string(e.what()).find(fragment.toStdString()) != std::string::npos, e.what());
      QVERIFY(std::string(e.what()).find('\n') == std::string::npos);
    }
  }

  void realCranium() {
    const std::string p = io::findInVesaliusSample();
    if (p.empty()) QSKIP("invesalius-examples not installed");
    const auto proj = io::readInVesalius(p);
    QCOMPARE(proj.image.size(), (std::array<std::int64_t, 3>{256, 256, 108}));
    QVERIFY(std::fabs(proj.image.geometry().spacing[0] - 0.957) < 1e-3);
    QCOMPARE(proj.image.geometry().spacing[2], 1.5);
    QCOMPARE(proj.image.range().first, -1024.0f);
    QVERIFY(proj.masks.size() >= 1);
    // The bone mask (threshold from 226 HU) covers bright voxels only.
    const Volume& bone = proj.masks[0].mask;
    std::int64_t on = 0, brightOn = 0;
    for (std::size_t i = 0; i < bone.voxels().size(); ++i)
      if (bone.voxels()[i] > 0) { ++on; brightOn += proj.image.voxels()[i] >= 226.0f; }
    QVERIFY(on > 100000);
    QVERIFY2(brightOn > on * 9 / 10, qPrintable(QString("%1 of %2").arg(brightOn).arg(on)));
  }
};

QTEST_GUILESS_MAIN(InVesaliusTest)
#include "InVesaliusTest.moc"
