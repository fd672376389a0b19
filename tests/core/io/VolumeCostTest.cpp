// What a volume costs (issue 50): its load is judged from the header before anything is decoded,
// reads go through z-slabs that equal a whole read, `info`'s summary streams the values, and a
// truncated single-file DICOM is refused with the bytes found and expected.
#include "core/base/Error.h"
#include "core/io/DicomSeries.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "TestVolumes.h"

#include <QTemporaryDir>
#include <QtTest>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace fs = std::filesystem;
using namespace splitseg;

namespace {

// Sets an environment variable for one scope.
class EnvScope {
public:
  EnvScope(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvScope() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// An honest NIfTI-1 .nii.gz of nx*ny*nz uint8 zeros: a few hundred KB that decode to much more.
void writeZerosNiftiGz(const std::string& path, int nx, int ny, int nz) {
  unsigned char h[352] = {};
  auto put32 = [&](int off, std::int32_t v) { std::memcpy(h + off, &v, 4); };
  auto put16 = [&](int off, std::int16_t v) { std::memcpy(h + off, &v, 2); };
  auto putF = [&](int off, float v) { std::memcpy(h + off, &v, 4); };
  put32(0, 348);
  put16(40, 3);
  put16(42, static_cast<std::int16_t>(nx));
  put16(44, static_cast<std::int16_t>(ny));
  put16(46, static_cast<std::int16_t>(nz));
  for (int d = 4; d <= 7; ++d) put16(40 + 2 * d, 1);
  put16(70, 2);  // uint8
  put16(72, 8);
  for (int i = 0; i < 4; ++i) putF(76 + 4 * i, 1.0f);
  putF(108, 352.0f);
  std::memcpy(h + 344, "n+1", 4);
  gzFile f = gzopen(path.c_str(), "wb1");
  QVERIFY(f);
  QCOMPARE(gzwrite(f, h, sizeof h), static_cast<int>(sizeof h));
  std::vector<unsigned char> zeros(1 << 20, 0);
  std::uint64_t left = static_cast<std::uint64_t>(nx) * ny * nz;
  while (left > 0) {
    const auto n = static_cast<unsigned>(std::min<std::uint64_t>(left, zeros.size()));
    QCOMPARE(gzwrite(f, zeros.data(), n), static_cast<int>(n));
    left -= n;
  }
  QCOMPARE(gzclose(f), Z_OK);
}

std::string readAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

} // namespace

class VolumeCostTest : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string path(const std::string& name) const { return (fs::path(tmp_.path().toStdString()) / name).string(); }

private Q_SLOTS:
  // One xy-plane per slab (the smallest slab): every format reads the same voxels as whole,
  // and the streamed summary has the volume's range.
  void slabsEqualWhole_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("integer");
    for (const char* ext : {".nii", ".nii.gz", ".nrrd", ".mha", ".mhd"}) {
      QTest::newRow((std::string("int16 ") + ext).c_str()) << QString("slab_i") + ext << true;
      QTest::newRow((std::string("float32 ") + ext).c_str()) << QString("slab_f") + ext << false;
    }
  }
  void slabsEqualWhole() {
    QFETCH(QString, name);
    QFETCH(bool, integer);
    const Volume v = test::makeTestVolume({7, 6, 5}, 11, integer);
    const std::string p = path(name.toStdString());
    io::writeVolume(v, p);
    const std::string plane = std::to_string(7 * 6 * (integer ? 2 : 4));
    for (const std::string& slab : {plane, std::string("1000000000")}) {
      const EnvScope scope("SPLITSEG_READ_SLAB_BYTES", slab);
      const Volume r = io::readVolume(p);
      QVERIFY2(r.voxels() == v.voxels(), slab.c_str());
      QCOMPARE(r.pixelType(), v.pixelType());
      const io::VolumeSummary s = io::summarizeVolume(p);
      QCOMPARE(s.min, v.range().first);
      QCOMPARE(s.max, v.range().second);
      QCOMPARE(s.nonFinite, std::int64_t{0});
      QCOMPARE(s.header.geometry.size, v.geometry().size);
      QCOMPARE(s.header.pixelType, v.pixelType());
    }
  }

  // NIfTI's summary streams the file itself: scaled values (scl_slope, scl_inter) give the range
  // the read gives, in the file as written and gzipped.
  void summaryOfScaledNifti_data() {
    QTest::addColumn<float>("slope");
    QTest::addColumn<float>("inter");
    QTest::newRow("none (slope 0)") << 0.0f << 0.0f;
    QTest::newRow("identity") << 1.0f << 0.0f;
    QTest::newRow("CT rescale") << 1.0f << -1024.0f;
    QTest::newRow("slope 2.5, intercept -3") << 2.5f << -3.0f;
  }
  void summaryOfScaledNifti() {
    QFETCH(float, slope);
    QFETCH(float, inter);
    const Volume v = test::makeTestVolume({7, 6, 5}, 13, true);
    const std::string plain = path("scaled.nii");
    io::writeVolume(v, plain);
    std::string bytes = readAll(plain);
    std::memcpy(&bytes[112], &slope, 4);
    std::memcpy(&bytes[116], &inter, 4);
    { std::ofstream(plain, std::ios::binary | std::ios::trunc) << bytes; }
    const std::string packed = path("scaled.nii.gz");
    {
      gzFile f = gzopen(packed.c_str(), "wb1");
      QVERIFY(f);
      QCOMPARE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
      QCOMPARE(gzclose(f), Z_OK);
    }
    for (const std::string& p : {plain, packed}) {
      const Volume r = io::readVolume(p);
      const io::VolumeSummary s = io::summarizeVolume(p);
      QCOMPARE(s.min, r.range().first);
      QCOMPARE(s.max, r.range().second);
      QCOMPARE(s.header.pixelType, r.pixelType());
    }
    if (slope != 0 && slope != 1) QVERIFY(io::summarizeVolume(plain).max != v.range().second);  // scaled indeed
  }

  // NaN and infinities are counted by the summary (NIfTI in the file itself: ITK reads them as 0).
  void summaryCountsNonFinite_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("NIfTI") << "nan.nii";
    QTest::newRow("NIfTI gz") << "nan.nii.gz";
    QTest::newRow("MetaImage") << "nan.mha";
  }
  void summaryCountsNonFinite() {
    QFETCH(QString, name);
    Volume v = test::makeTestVolume({7, 6, 5}, 12, false);
    v.at(2, 3, 1) = std::numeric_limits<float>::quiet_NaN();
    v.at(4, 0, 3) = std::numeric_limits<float>::infinity();
    const std::string p = path(name.toStdString());
    io::writeVolume(v, p);
    const EnvScope scope("SPLITSEG_READ_SLAB_BYTES", std::to_string(7 * 6 * 4));
    const io::VolumeSummary s = io::summarizeVolume(p);
    QCOMPARE(s.nonFinite, std::int64_t{2});
    QCOMPARE(QString::fromStdString(s.nonFiniteNote), QString("2 voxels are NaN or infinite (first at 2,3,1)"));
    QVERIFY_THROWS_EXCEPTION(FormatError, io::readVolume(p));
  }

  // A 180 KB gzip that honestly decodes to 128 MiB of uint8, read with 256 MiB to spend: the
  // load is refused from the header with its figures; info's summary still streams through it.
  void refusesBeyondTheBudget() {
    const std::string p = path("bomb.nii.gz");
    writeZerosNiftiGz(p, 512, 512, 512);
    QVERIFY2(fs::file_size(p) < 1024 * 1024, std::to_string(fs::file_size(p)).c_str());
    const EnvScope scope("SPLITSEG_READ_MEMORY", std::to_string(256u << 20));
    try {
      io::readVolume(p);
      QFAIL("loaded past the budget");
    } catch (const FormatError& e) {
      QCOMPARE(QString(e.what()),
               QString::fromStdString(p + ": decodes to 128.0 MiB; with its float copy this needs 640.0 MiB, more than the available memory (256.0 MiB)"));
    }
    const io::VolumeSummary s = io::summarizeVolume(p);
    QCOMPARE(s.header.geometry.size, (std::array<std::int64_t, 3>{512, 512, 512}));
    QCOMPARE(s.header.pixelType, std::string("uint8"));
    QCOMPARE(s.min, 0.0f);
    QCOMPARE(s.max, 0.0f);
    const io::ImageHeader h = io::readHeader(p);
    QCOMPARE(h.geometry.size, s.header.geometry.size);
  }

  // A single DICOM file missing the last 62 bytes of its pixel data (as pydicom's MR_truncated.dcm):
  // GDCM reads it zero-filled; every read refuses it with the bytes found and expected.
  void truncatedSingleDicom() {
    const std::string dir = path("dicom");
    io::writeDicomSeries(test::makeTestVolume({16, 16, 3}, 13, true), dir);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    const std::string whole = files[1];
    QVERIFY(io::dicomPixelDataProblem(whole, 16 * 16 * 2).empty());
    const std::string cut = path("truncated.dcm");
    std::string bytes = readAll(whole);
    bytes.resize(bytes.size() - 62);
    std::ofstream(cut, std::ios::binary) << bytes;
    const std::string expected = cut + ": truncated: the pixel data declares 512 bytes, the file holds 450";
    const auto refused = [&](const char* what, const std::function<void()>& read) {
      try {
        read();
        QFAIL(what);
      } catch (const FormatError& e) {
        QCOMPARE(QString(e.what()), QString::fromStdString(expected));
      }
    };
    refused("readVolume", [&] { io::readVolume(cut); });
    refused("readHeader", [&] { io::readHeader(cut); });
    refused("summarizeVolume", [&] { io::summarizeVolume(cut); });
    // A whole Pixel Data element shorter than the image: refused too, with both figures.
    QCOMPARE(QString::fromStdString(io::dicomPixelDataProblem(whole, 16 * 16 * 2 + 2)),
             QString("truncated: the pixel data holds 512 bytes, the image needs 514"));
  }
};

QTEST_GUILESS_MAIN(VolumeCostTest)
#include "VolumeCostTest.moc"
