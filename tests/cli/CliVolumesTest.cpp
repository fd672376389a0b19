// End to end through files: train on an image/label pair, predict a volume with an oblique,
// anisotropic geometry, and get a segmentation on exactly the source grid.
#include "core/data/Phantom.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/postprocess/LargestComponent.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <cmath>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace splitseg;

namespace {
int cli(const QStringList& args, QString* err = nullptr, QByteArray* out = nullptr) {
  QProcess p;
  p.start(SPLITSEG_CLI, args);
  p.waitForFinished(600000);
  if (err) *err = QString::fromUtf8(p.readAllStandardError());
  if (out) *out = p.readAllStandardOutput();
  return p.exitCode();
}
} // namespace

class CliVolumesTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void trainThenInferKeepsGeometry() {
    QTemporaryDir dir;
    data::PhantomOptions po;
    po.size = {40, 36, 24};
    po.spacing = {0.8, 0.9, 2.0};
    po.seed = 3;
    auto p = data::makePhantom(po);
    auto& g = p.image.geometry();
    g.origin = {-12.5, 30.0, 7.25};
    const double c = std::cos(0.3), s = std::sin(0.3);
    g.direction = {c, -s, 0, s, c, 0, 0, 0, 1};
    p.label.geometry() = g;
    const auto image = (dir.path() + "/image.nii.gz").toStdString();
    const auto label = (dir.path() + "/label.nrrd").toStdString();
    io::writeVolume(p.image, image);
    io::writeVolume(p.label, label);

    const QString ckpt = dir.path() + "/model.pt", out = dir.path() + "/seg.nii.gz";
    QString err;
    QCOMPARE(cli({"train", "--image", QString::fromStdString(image), "--label", QString::fromStdString(label),
                  "--intensity", "none", "--patch", "16", "--base", "4", "--depth", "3", "--steps", "3",
                  "--save", ckpt, "--progress", "none"}, &err), 0);
    QVERIFY2(QFile::exists(ckpt), qPrintable(err));
    // One image/label pair has no validation case: validation says so instead of a loss of 0.
    {
      QProcess p;
      p.start(SPLITSEG_CLI, {"train", "--image", QString::fromStdString(image), "--label", QString::fromStdString(label),
                             "--intensity", "none", "--patch", "16", "--base", "4", "--depth", "3", "--steps", "2",
                             "--validate-every", "1", "--progress", "jsonl"});
      QVERIFY(p.waitForFinished(600000));
      QCOMPARE(p.exitCode(), 0);
      int validations = 0;
      for (const auto& line : QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
        const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
        if (!o.value("validation").toBool()) continue;
        ++validations;
        QCOMPARE(o.value("cases").toInt(-1), 0);
        QVERIFY2(!o.contains("loss"), qPrintable(line));
        QCOMPARE(o.value("message").toString(), QString("no validation cases"));
      }
      QCOMPARE(validations, 2);
    }
    QByteArray line;
    QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "16",
                  "--out", out, "--progress", "none"}, &err, &line), 0);
    // The planner's CPU peak beside the one measured over the prediction (LibTorch's allocations
    // and the preprocessed image), as for --synthetic.
    const auto memory = QJsonDocument::fromJson(line).object()["memory"].toObject();
    const double planned = memory["planned"].toObject()["cpu"].toDouble();
    const double measured = memory["measured"].toObject()["cpu"].toDouble();
    QVERIFY2(measured > 0 && std::abs(planned - measured) <= 0.02 * measured, line.constData());
    const auto seg = io::readVolume(out.toStdString());
    QVERIFY2(seg.geometry().sameGrid(g), seg.geometry().differenceTo(g).c_str());
    // --window largest: this host fits the whole volume in one window (40 voxels, the longest side
    // on the network's grid), so the labels are those of one pass over the whole volume.
    {
      const QString largestOut = dir.path() + "/seg-largest.nii.gz", wholeOut = dir.path() + "/seg-whole.nii.gz";
      QByteArray largestLine;
      QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "largest",
                    "--out", largestOut, "--progress", "none"}, &err, &largestLine), 0);
      QVERIFY2(err.contains("--window largest: 40^3 (the whole volume in one pass)"), qPrintable(err));
      QCOMPARE(QJsonDocument::fromJson(largestLine).object()["window"].toArray(), (QJsonArray{40, 40, 40}));
      QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "0", "--out",
                    wholeOut, "--progress", "none"}, &err), 0);
      QVERIFY(io::readVolume(largestOut.toStdString()).voxels() == io::readVolume(wholeOut.toStdString()).voxels());
    }
    // Test-time mirroring and the largest region per label: the plan still holds the measured
    // peak to 2% (the flipped windows and the logits' sum counted), and the post-processed labels
    // are the mirrored prediction with the voxels the line reports removed, one region per label.
    {
      const QString mirroredOut = dir.path() + "/seg-mirrored.nii.gz", keptOut = dir.path() + "/seg-kept.nii.gz";
      QByteArray mirroredLine, keptLine;
      QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "16",
                    "--mirror", "xyz", "--out", mirroredOut, "--progress", "none"}, &err, &mirroredLine), 0);
      const auto o = QJsonDocument::fromJson(mirroredLine).object();
      QCOMPARE(o["mirror"].toString(), QString("xyz"));
      QVERIFY2(!o.contains("keep_largest"), mirroredLine.constData());
      const auto m = o["memory"].toObject();
      const double mPlanned = m["planned"].toObject()["cpu"].toDouble(), mMeasured = m["measured"].toObject()["cpu"].toDouble();
      QVERIFY2(mMeasured > measured && std::abs(mPlanned - mMeasured) <= 0.02 * mMeasured, mirroredLine.constData());
      QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "16",
                    "--mirror", "xyz", "--keep-largest", "--out", keptOut, "--progress", "none"}, &err, &keptLine), 0);
      const auto mirrored = io::readVolume(mirroredOut.toStdString());
      auto kept = io::readVolume(keptOut.toStdString());
      QVERIFY(mirrored.voxels() != seg.voxels());  // mirroring changed the prediction
      std::int64_t removed = 0, changedElsewhere = 0;
      for (std::size_t i = 0; i < kept.voxels().size(); ++i) {
        if (kept.voxels()[i] == mirrored.voxels()[i]) continue;
        if (kept.voxels()[i] == 0.0f) ++removed;
        else ++changedElsewhere;
      }
      QCOMPARE(changedElsewhere, std::int64_t{0});
      std::int64_t reported = 0;
      for (const auto& c : QJsonDocument::fromJson(keptLine).object()["keep_largest"].toArray())
        reported += c.toObject()["removed"].toInteger();
      QCOMPARE(removed, reported);
      for (const auto& c : postprocess::keepLargestComponents(kept)) QCOMPARE(c.removed, std::int64_t{0});
      // Only for images: a phantom's prediction is refused with one line.
      QVERIFY(cli({"infer", "--synthetic", "16", "--base", "4", "--keep-largest", "--progress", "none"}, &err) != 0);
      QVERIFY2(err.contains("--keep-largest") && err.count('\n') <= 1, qPrintable(err));
    }
    const auto [lo, hi] = seg.range();
    QVERIFY(lo >= 0.0f && hi <= 1.0f);

    // No --intensity above: the run in the checkpoint carries the preprocessing it was trained
    // with (none, not the CT window a run defaults to)...
    QProcess print;
    print.start(SPLITSEG_CLI, {"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--print-run"});
    QVERIFY(print.waitForFinished(600000));
    QCOMPARE(print.exitCode(), 0);
    const auto run = QJsonDocument::fromJson(print.readAllStandardOutput()).object();
    QCOMPARE(run["preprocessing"].toObject()["intensity"].toObject()["mode"].toString(), QString("none"));
    // ...and predicts exactly as when the same preprocessing is given by hand.
    const QString explicitOut = dir.path() + "/seg-explicit.nii.gz";
    QCOMPARE(cli({"infer", "--image", QString::fromStdString(image), "--checkpoint", ckpt, "--window", "16",
                  "--intensity", "none", "--out", explicitOut, "--progress", "none"}, &err), 0);
    const auto explicitSeg = io::readVolume(explicitOut.toStdString());
    QVERIFY(explicitSeg.geometry().sameGrid(seg.geometry()));
    QVERIFY(explicitSeg.voxels() == seg.voxels());
  }

  void badImageFailsCleanly() {
    QTemporaryDir dir;
    const QString bad = dir.path() + "/broken.nii.gz", out = dir.path() + "/seg.nii.gz";
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not an image at all");
    f.close();
    QString err;
    QVERIFY(cli({"infer", "--image", bad, "--base", "4", "--out", out, "--progress", "none"}, &err) != 0);
    QVERIFY2(err.contains("broken.nii.gz"), qPrintable(err));
    QVERIFY(!QFile::exists(out));
  }
};

QTEST_GUILESS_MAIN(CliVolumesTest)
#include "CliVolumesTest.moc"
