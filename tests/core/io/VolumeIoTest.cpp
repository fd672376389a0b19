// Round trips of every format with anisotropic spacing and oblique direction, DICOM
// series, segmentation writing in source geometry, atomic writes, and bad input.
#include "core/base/Error.h"
#include "core/io/DicomSeries.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/volume/GeometryCheck.h"
#include "TestVolumes.h"

#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace splitseg;

namespace {

void compareGeometry(const Geometry& a, const Geometry& b, double tol) {
  QCOMPARE(a.size, b.size);
  for (int i = 0; i < 3; ++i) {
    QVERIFY2(std::fabs(a.spacing[i] - b.spacing[i]) < tol, qPrintable(QString("spacing %1").arg(i)));
    QVERIFY2(std::fabs(a.origin[i] - b.origin[i]) < tol, qPrintable(QString("origin %1: %2 vs %3").arg(i).arg(a.origin[i]).arg(b.origin[i])));
  }
  for (int i = 0; i < 9; ++i)
    QVERIFY2(std::fabs(a.direction[i] - b.direction[i]) < tol, qPrintable(QString("direction %1").arg(i)));
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string readAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void putFloat(std::string& bytes, std::size_t offset, float v) { std::memcpy(&bytes[offset], &v, 4); }

bool hasTempLeftovers(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".splitseg-tmp", 0) == 0) return true;
  return false;
}

} // namespace

class VolumeIoTest : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  std::string path(const std::string& name) const { return (fs::path(tmp_.path().toStdString()) / name).string(); }

private Q_SLOTS:
  void roundTrip_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("integer");
    for (const char* ext : {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd"}) {
      QTest::newRow((std::string("int16 ") + ext).c_str()) << QString("rt_i") + ext << true;
      QTest::newRow((std::string("float32 ") + ext).c_str()) << QString("rt_f") + ext << false;
    }
  }
  void roundTrip() {
    QFETCH(QString, name);
    QFETCH(bool, integer);
    const Volume v = test::makeTestVolume({7, 6, 5}, 3, integer);
    const std::string p = path(name.toStdString());
    io::writeVolume(v, p);
    const Volume r = io::readVolume(p);
    QCOMPARE(r.pixelType(), v.pixelType());
    compareGeometry(r.geometry(), v.geometry(), 1e-4);
    QVERIFY(r.voxels() == v.voxels());
    const auto h = io::readHeader(p);
    compareGeometry(h.geometry, v.geometry(), 1e-4);
    QVERIFY(!hasTempLeftovers(tmp_.path().toStdString()));
  }

  void dicomRoundTrip() {
    const Volume v = test::makeTestVolume({8, 7, 6}, 5, true);
    const std::string dir = path("dicom1");
    io::writeDicomSeries(v, dir);
    const auto series = io::listDicomSeries(dir);
    QCOMPARE(series.size(), std::size_t(1));
    QCOMPARE(series[0].sliceCount, std::size_t(6));
    QCOMPARE(series[0].modality, std::string("CT"));
    const Volume r = io::readVolume(dir);
    QCOMPARE(r.pixelType(), std::string("int16"));
    compareGeometry(r.geometry(), v.geometry(), 1e-4);
    QVERIFY(r.voxels() == v.voxels());
  }

  void dicomSeveralSeries() {
    const std::string a = path("dicomA"), b = path("dicomB"), both = path("dicomBoth");
    io::writeDicomSeries(test::makeTestVolume({5, 4, 3}, 7, true), a);
    io::writeDicomSeries(test::makeTestVolume({5, 4, 4}, 8, true), b);
    fs::create_directory(both);
    for (const auto& d : {a, b})
      for (const auto& e : fs::directory_iterator(d))
        fs::copy_file(e.path(), fs::path(both) / (fs::path(d).filename().string() + e.path().filename().string()));
    const auto series = io::listDicomSeries(both);
    QCOMPARE(series.size(), std::size_t(2));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, io::readVolume(both));
    for (const auto& s : series) {
      io::ReadOptions o;
      o.dicomSeriesUid = s.uid;
      const Volume r = io::readVolume(both, o);
      QCOMPARE(static_cast<std::size_t>(r.size()[2]), s.sliceCount);
    }
  }

  void segmentationInSourceGeometry() {
    const Volume image = test::makeTestVolume({6, 5, 4}, 9, true);
    Volume labels(Geometry{image.size(), {1, 1, 1}, {0, 0, 0}, {1, 0, 0, 0, 1, 0, 0, 0, 1}});
    for (std::size_t i = 0; i < labels.voxels().size(); ++i) labels.voxels()[i] = static_cast<float>(i % 3);
    for (const char* ext : {".nii.gz", ".nrrd", ".mha"}) {
      const std::string p = path(std::string("seg") + ext);
      io::writeSegmentation(labels, image.geometry(), p);
      const Volume r = io::readVolume(p);
      QCOMPARE(r.pixelType(), std::string("uint8"));
      compareGeometry(r.geometry(), image.geometry(), 1e-4);
      QVERIFY(r.voxels() == labels.voxels());
    }
    Volume wrong(Geometry{{6, 5, 3}});
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, io::writeSegmentation(wrong, image.geometry(), path("bad.nii.gz")));
    QVERIFY(!fs::exists(path("bad.nii.gz")));
  }

  void atomicWriteLeavesNothing() {
    const Volume v = test::makeTestVolume();
    QVERIFY_THROWS_EXCEPTION(IoError, io::writeVolume(v, path("missing/dir/x.nii.gz")));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, io::writeVolume(v, path("x.png")));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, io::writeVolume(v, path("x.nii.gz"), {"complex128", true}));
    QVERIFY(!fs::exists(path("x.nii.gz")));
    QVERIFY(!hasTempLeftovers(tmp_.path().toStdString()));
    // Overwriting replaces the old file completely.
    io::writeVolume(v, path("over.mha"));
    Volume w = test::makeTestVolume({3, 3, 3}, 2);
    io::writeVolume(w, path("over.mha"));
    QCOMPARE(io::readVolume(path("over.mha")).size(), w.size());
  }

  // Malformed inputs: each row makes a file and says which error must name it.
  void badInput_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expected");  // IoError | FormatError
    QTest::addColumn<QString>("message");   // fragment of the message
    QTest::newRow("missing") << "missing" << "IoError" << "no such file";
    QTest::newRow("empty") << "empty" << "FormatError" << "empty";
    QTest::newRow("text as nii") << "text" << "FormatError" << "not a recognised image";
    QTest::newRow("truncated nii") << "truncNii" << "FormatError" << "truncated";
    QTest::newRow("truncated nii.gz") << "truncNiiGz" << "FormatError" << "";
    QTest::newRow("truncated mha") << "truncMha" << "FormatError" << "truncated";
    QTest::newRow("corrupt nii magic") << "badMagic" << "FormatError" << "";
    QTest::newRow("corrupt nii dim") << "badDim" << "FormatError" << "";
    QTest::newRow("2D mha") << "2d" << "FormatError" << "2D";
    QTest::newRow("4D mha") << "4d" << "FormatError" << "4D";
    QTest::newRow("vector mha") << "vector" << "FormatError" << "components";
    QTest::newRow("NaN voxels") << "nan" << "FormatError" << "NaN";
    QTest::newRow("NaN voxels nii") << "nanNii" << "FormatError" << "NaN";
    QTest::newRow("Inf voxels nii.gz") << "infNiiGz" << "FormatError" << "NaN or infinite";
    QTest::newRow("huge size") << "huge" << "FormatError" << "";
    QTest::newRow("mhd without data") << "noData" << "FormatError" << "does not exist";
    // Issue 15: hostile headers refused before ITK/VNL compute with them, one line each.
    QTest::newRow("NaN spacing nii") << "nanSpacingNii" << "FormatError" << "spacing along x";
    QTest::newRow("NaN origin nii") << "nanOriginNii" << "FormatError" << "qoffset_x";
    QTest::newRow("NaN direction nii") << "nanDirectionNii" << "FormatError" << "quatern_b";
    QTest::newRow("vox_offset 1e12 nii") << "voxOffsetHuge" << "FormatError" << "vox_offset";
    QTest::newRow("vox_offset NaN nii") << "voxOffsetNan" << "FormatError" << "vox_offset";
    QTest::newRow("NaN origin mha") << "nanOriginMha" << "FormatError" << "origin along x";
    QTest::newRow("singular direction mha") << "singularMha" << "FormatError" << "singular";
    QTest::newRow("size beyond memory mha") << "memoryMha" << "FormatError" << "available memory";
    QTest::newRow("mhd data file absolute") << "dataAbsolute" << "FormatError" << "absolute";
    QTest::newRow("mhd data file ..") << "dataDotDot" << "FormatError" << "leaves its folder";
    QTest::newRow("mhd data file symlink out") << "dataSymlink" << "FormatError" << "outside its folder";
    QTest::newRow("mhd data file FIFO") << "dataFifo" << "FormatError" << "FIFO";
    QTest::newRow("nhdr data file ..") << "nhdrDotDot" << "FormatError" << "leaves its folder";
    QTest::newRow("nhdr data file LIST") << "nhdrList" << "FormatError" << "list or pattern";
    QTest::newRow("FIFO as image") << "fifo" << "IoError" << "FIFO";
  }
  void badInput() {
    QFETCH(QString, kind);
    QFETCH(QString, expected);
    QFETCH(QString, message);
    const std::string k = kind.toStdString();
    std::string p = path("bad_" + k + ".mha");
    const std::string mhaHead = "ObjectType = Image\nBinaryData = True\nBinaryDataByteOrderMSB = False\n";
    if (k == "missing") p = path("does_not_exist.nii.gz");
    else if (k == "empty") { p = path("empty.nii"); writeText(p, ""); }
    else if (k == "text") { p = path("text.nii"); writeText(p, "this is not an image, just words\n"); }
    else if (k == "truncNii" || k == "badMagic" || k == "badDim") {
      p = path("bad_" + k + ".nii");
      io::writeVolume(test::makeTestVolume({16, 16, 16}), p);
      std::string bytes = readAll(p);
      if (k == "truncNii") bytes.resize(bytes.size() / 2);
      if (k == "badMagic") { bytes[0] = 'X'; bytes[1] = 'Y'; bytes[344] = 'z'; bytes[345] = 'z'; }
      if (k == "badDim") { bytes[40] = 9; bytes[41] = 0; }
      writeText(p, bytes);
    } else if (k == "truncNiiGz") {
      p = path("bad_trunc.nii.gz");
      io::writeVolume(test::makeTestVolume({32, 32, 32}), p);
      std::string bytes = readAll(p);
      bytes.resize(bytes.size() / 2);
      writeText(p, bytes);
    } else if (k == "truncMha") {
      io::writeVolume(test::makeTestVolume({16, 16, 16}), p, {"", false});
      std::string bytes = readAll(p);
      bytes.resize(bytes.size() - 100);
      writeText(p, bytes);
    } else if (k == "2d") {
      writeText(p, "ObjectType = Image\nNDims = 2\nBinaryData = True\nDimSize = 2 2\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(4, '\1'));
    } else if (k == "4d") {
      writeText(p, "ObjectType = Image\nNDims = 4\nBinaryData = True\nDimSize = 2 2 2 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(24, '\1'));
    } else if (k == "vector") {
      writeText(p, mhaHead + "NDims = 3\nDimSize = 2 2 2\nElementNumberOfChannels = 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(24, '\1'));
    } else if (k == "nan") {
      Volume v = test::makeTestVolume({4, 4, 4}, 1, false);
      v.at(1, 2, 3) = std::nanf("");
      io::writeVolume(v, p);
    } else if (k == "nanNii" || k == "infNiiGz") {
      // ITK's NIfTI reader turns these into 0; the reader must still refuse them.
      p = path(k == "nanNii" ? "nan.nii" : "inf.nii.gz");
      Volume v = test::makeTestVolume({4, 4, 4}, 1, false);
      v.at(3, 0, 2) = k == "nanNii" ? std::nanf("") : INFINITY;
      io::writeVolume(v, p);
    } else if (k == "huge") {
      writeText(p, mhaHead + "NDims = 3\nDimSize = 100000 100000 100000\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(8, '\1'));
    } else if (k == "nanSpacingNii" || k == "nanOriginNii" || k == "nanDirectionNii" || k == "voxOffsetHuge" ||
               k == "voxOffsetNan") {
      p = path("bad_" + k + ".nii");
      io::writeVolume(test::makeTestVolume({8, 8, 8}, 1, false), p);
      std::string bytes = readAll(p);
      const float nan = std::nanf("");
      if (k == "nanSpacingNii") putFloat(bytes, 80, nan);
      if (k == "nanOriginNii") { putFloat(bytes, 268, nan); putFloat(bytes, 292, nan); }
      if (k == "nanDirectionNii") { putFloat(bytes, 256, nan); putFloat(bytes, 280, nan); }
      if (k == "voxOffsetHuge") putFloat(bytes, 108, 1e12f);
      if (k == "voxOffsetNan") putFloat(bytes, 108, nan);
      writeText(p, bytes);
    } else if (k == "nanOriginMha" || k == "singularMha") {
      writeText(p, mhaHead + "NDims = 3\nDimSize = 2 2 2\n" +
                       (k == "nanOriginMha" ? "Offset = nan 0 0\n" : "TransformMatrix = 1 0 0 1 0 0 0 0 1\n") +
                       "ElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(8, '\1'));
    } else if (k == "memoryMha") {
      // Twice what the memory available now allows (the cap follows MemAvailable; the margin
      // keeps the row stable while other processes free memory).
      const std::int64_t z = voxelCap(1 + sizeof(float)) / (1 << 19) + 1;
      writeText(p, mhaHead + "NDims = 3\nDimSize = 1024 1024 " + std::to_string(z) +
                       "\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n" + std::string(8, '\1'));
    } else if (k.rfind("data", 0) == 0 || k.rfind("nhdr", 0) == 0) {
      // Detached data named by a header in sub/: must stay in sub/ and be a regular file.
      fs::create_directories(path("sub"));
      writeText(path("outside.raw"), std::string(8, '\1'));
      std::string data = "../outside.raw";
      if (k == "dataAbsolute") data = path("outside.raw");
      if (k == "dataSymlink") { data = "link.raw"; fs::remove(path("sub/link.raw")); fs::create_symlink("../outside.raw", path("sub/link.raw")); }
      if (k == "dataFifo") { data = "fifo.raw"; fs::remove(path("sub/fifo.raw")); QCOMPARE(::mkfifo(path("sub/fifo.raw").c_str(), 0600), 0); }
      if (k == "nhdrList") data = "LIST\nsome.raw";
      if (k.rfind("nhdr", 0) == 0) {
        p = path("sub/" + k + ".nhdr");
        writeText(p, "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 2 2 2\nencoding: raw\ndata file: " + data + "\n");
      } else {
        p = path("sub/" + k + ".mhd");
        writeText(p, mhaHead + "NDims = 3\nDimSize = 2 2 2\nElementType = MET_UCHAR\nElementDataFile = " + data + "\n");
      }
    } else if (k == "fifo") {
      p = path("fifo.nii");
      fs::remove(p);
      QCOMPARE(::mkfifo(p.c_str(), 0600), 0);
    } else if (k == "noData") {
      p = path("nodata.mhd");
      writeText(p, mhaHead + "NDims = 3\nDimSize = 2 2 2\nElementType = MET_UCHAR\nElementDataFile = nodata.raw\n");
    }
    try {
      io::readVolume(p);
      QFAIL("no error");
    } catch (const FormatError& e) {
      QVERIFY2(std::string(e.what()).find('\n') == std::string::npos, e.what());
      QCOMPARE(QString("FormatError"), expected);
      QVERIFY2(std::string(e.what()).find(p) != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find(message.toStdString()) != std::string::npos, e.what());
      QCOMPARE(e.path(), p);
    } catch (const IoError& e) {
      QCOMPARE(QString("IoError"), expected);
      QVERIFY2(std::string(e.what()).find(message.toStdString()) != std::string::npos, e.what());
      QCOMPARE(e.path(), p);
    }
  }

  // GDCM reads a truncated slice as if whole; the reader must refuse it, naming the slice.
  void dicomTruncatedSlice() {
    const std::string dir = path("dicomTrunc");
    io::writeDicomSeries(test::makeTestVolume({16, 16, 5}, 3, true), dir);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    const std::string victim = files[2];
    std::string bytes = readAll(victim);
    bytes.resize(bytes.size() - 40);
    writeText(victim, bytes);
    bool refused = false;
    try {
      io::readVolume(dir);
    } catch (const FormatError& e) {
      refused = true;
      QCOMPARE(e.path(), victim);
      QVERIFY2(std::string(e.what()).find("truncated") != std::string::npos, e.what());
    }
    // GDCM fills the missing tail of the pixel data itself; the element's declared length is
    // compared with what the file holds (DicomSeries.cpp, pixelDataProblem).
    QVERIFY(refused);
  }

  // A FIFO among the slices must not block the scan.
  void dicomFolderWithFifo() {
    const std::string dir = path("dicomFifo");
    io::writeDicomSeries(test::makeTestVolume({6, 6, 3}, 4, true), dir);
    QCOMPARE(::mkfifo((dir + "/zz.dcm").c_str(), 0600), 0);
    try {
      io::readVolume(dir);
      QFAIL("no error");
    } catch (const FormatError& e) {
      QVERIFY2(std::string(e.what()).find("FIFO") != std::string::npos, e.what());
    }
  }

  // Temporary names are unique: a writer never removes another writer's temporary.
  void dicomWriterKeepsOthersTemporaries() {
    const std::string other = path(".splitseg-tmp-seriesT");
    fs::create_directory(other);
    writeText(other + "/inflight.dcm", "another writer's slice");
    io::writeDicomSeries(test::makeTestVolume({4, 4, 3}, 6, true), path("seriesT"));
    QVERIFY(fs::exists(other + "/inflight.dcm"));
    fs::remove_all(other);
    QVERIFY(!hasTempLeftovers(tmp_.path().toStdString()));
  }

  void badDicomFolder() {
    const std::string d = path("notdicom");
    fs::create_directory(d);
    writeText(d + "/a.txt", "hello");
    QVERIFY_THROWS_EXCEPTION(FormatError, io::readVolume(d));
    QVERIFY_THROWS_EXCEPTION(IoError, io::listDicomSeries(path("nope")));
  }
};

QTEST_GUILESS_MAIN(VolumeIoTest)
#include "VolumeIoTest.moc"
