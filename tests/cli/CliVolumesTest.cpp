// End to end through files: train on an image/label pair, predict a volume with an oblique,
// anisotropic geometry, and get a segmentation on exactly the source grid.
#include "core/data/Phantom.h"
#include "core/dataset/Dataset.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/metrics/SegmentationMetrics.h"
#include "core/postprocess/LargestComponent.h"
#include "tests/support/PhantomDataset.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <cmath>
#include <QJsonObject>
#include <QCryptographicHash>
#include <QDir>
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

  // infer --image --label, and infer --dataset over a dataset's cases (all, or the validation cases
  // the training split held out, the dataset taken from the checkpoint): each prediction written
  // and scored, the scores those of the files on disk, summary.json with the mean per label; a
  // case that cannot be read is reported and the others go on; nothing of the dataset's is
  // overwritten.
  void scoresPredictionsOfADataset() {
    QTemporaryDir dir;
    const QString root = dir.path() + "/Toy";
    checks::PhantomDatasetOptions po;
    po.firstSeed = 20;
    checks::writePhantomDataset(root.toStdString(), po);
    const QStringList ids{"case_0", "case_1", "case_2", "case_3"};
    const QString ckpt = dir.path() + "/toy.pt";
    QString err;
    QCOMPARE(cli({"train", "--dataset", root, "--intensity", "none", "--patch", "16", "--base", "4", "--depth", "3",
                  "--steps", "4", "--save", ckpt, "--progress", "none"}, &err), 0);
    const auto lines = [](const QByteArray& out) {
      QList<QJsonObject> v;
      for (const auto& l : out.split('\n'))
        if (!l.trimmed().isEmpty()) v << QJsonDocument::fromJson(l).object();
      return v;
    };
    // The Dice of label 1 of a written prediction against its ground truth, from the files.
    const auto diceOf = [](const QString& pred, const QString& truth) {
      const auto m = metrics::SegmentationMetrics::compute(io::readVolume(pred.toStdString()), io::readVolume(truth.toStdString()));
      return m.empty() ? -1.0 : m.front().dice;
    };

    // One image with its ground truth.
    {
      const QString out = dir.path() + "/one.nii.gz";
      QByteArray o;
      QCOMPARE(cli({"infer", "--image", root + "/imagesTr/case_1.nii.gz", "--label", root + "/labelsTr/case_1.nii.gz",
                    "--checkpoint", ckpt, "--window", "16", "--out", out, "--progress", "none"}, &err, &o), 0);
      const auto line = QJsonDocument::fromJson(o).object();
      const auto m = line["metrics"].toArray();
      QVERIFY2(m.size() == 1 && m[0].toObject()["label"].toInt() == 1, o.constData());
      QCOMPARE(m[0].toObject()["dice"].toDouble(), diceOf(out, root + "/labelsTr/case_1.nii.gz"));
      QCOMPARE(line["mean_dice"].toDouble(), m[0].toObject()["dice"].toDouble());
      // A ground truth of another grid is refused before anything is predicted or written.
      const QString other = dir.path() + "/other.nii.gz", refused = dir.path() + "/refused.nii.gz";
      data::PhantomOptions po;
      po.size = {16, 16, 16};
      io::writeVolume(data::makePhantom(po).label, other.toStdString());
      QVERIFY(cli({"infer", "--image", root + "/imagesTr/case_1.nii.gz", "--label", other, "--checkpoint", ckpt,
                   "--out", refused, "--progress", "none"}, &err) != 0);
      QVERIFY2(err.contains("not on the grid") && err.trimmed().count('\n') == 0, qPrintable(err));
      QVERIFY(!QFile::exists(refused));
    }

    // The validation cases of the checkpoint's own dataset: the split training made.
    const auto split = dataset::splitCases(4, 0.2, 0);
    QCOMPARE(static_cast<int>(split.validation.size()), 1);
    const QString heldOut = ids[static_cast<int>(split.validation.front())];
    {
      const QString out = dir.path() + "/validation";
      QByteArray o;
      QCOMPARE(cli({"infer", "--checkpoint", ckpt, "--cases", "validation", "--window", "16", "--out", out,
                    "--progress", "none"}, &err, &o), 0);
      const auto v = lines(o);
      QCOMPARE(v.size(), 2);  // the case, then the summary
      QCOMPARE(v[0]["case"].toString(), heldOut);
      QCOMPARE(v[1]["predicted"].toInt(), 1);
      QCOMPARE(QDir(out).entryList(QDir::Files), (QStringList{heldOut + ".nii.gz", "summary.json"}));
      QCOMPARE(v[0]["metrics"].toArray()[0].toObject()["dice"].toDouble(),
               diceOf(out + "/" + heldOut + ".nii.gz", root + "/labelsTr/" + heldOut + ".nii.gz"));
    }

    // Every case: the summary's mean is the mean of the cases' Dice, also in summary.json.
    {
      const QString out = dir.path() + "/all";
      QByteArray o;
      QCOMPARE(cli({"infer", "--dataset", root, "--checkpoint", ckpt, "--window", "16", "--out", out, "--progress", "none"},
                   &err, &o), 0);
      const auto v = lines(o);
      QCOMPARE(v.size(), 5);
      double sum = 0;
      for (int i = 0; i < 4; ++i) {
        QCOMPARE(v[i]["case"].toString(), ids[i]);
        const double d = diceOf(out + "/" + ids[i] + ".nii.gz", root + "/labelsTr/" + ids[i] + ".nii.gz");
        QCOMPARE(v[i]["metrics"].toArray()[0].toObject()["dice"].toDouble(), d);
        sum += d;
      }
      const auto label = v[4]["labels"].toArray()[0].toObject();
      QCOMPARE(label["cases"].toInt(), 4);
      QVERIFY(std::abs(label["mean_dice"].toDouble() - sum / 4) < 1e-12);
      QVERIFY(std::abs(v[4]["mean_dice"].toDouble() - sum / 4) < 1e-12);
      QFile f(out + "/summary.json");
      QVERIFY(f.open(QIODevice::ReadOnly));
      const auto summary = QJsonDocument::fromJson(f.readAll()).object();
      QCOMPARE(summary["metric_per_case"].toArray().size(), 4);
      QCOMPARE(summary["labels"].toArray()[0].toObject()["mean_dice"].toDouble(), label["mean_dice"].toDouble());
      // Each case's measured and planned peaks are in summary.json as in its line (Evaluate
      // dataset's column).
      for (int i = 0; i < 4; ++i) {
        const auto memory = summary["metric_per_case"].toArray()[i].toObject()["memory"].toObject();
        QVERIFY2(memory["measured"].toObject()["cpu"].toDouble() > 0 && memory["planned"].toObject()["cpu"].toDouble() > 0,
                 qPrintable(ids[i]));
        QCOMPARE(memory, v[i]["memory"].toObject());
      }

      // Over two local ranks (the decoder and head on rank 1; every stage sharded): the same files,
      // and every case's line has each rank's own peak over that case, near its plan (the meters
      // restart per case).
      QString sharded;
      for (const char* st : {"enc0", "enc1", "bottleneck", "dec1", "dec0", "head"})
        sharded += QString(sharded.isEmpty() ? "" : ",") + st + "=r0:cpu+r1:cpu";
      for (const QString& placement : {QString("dec0=r1:cpu,dec1=r1:cpu,head=r1:cpu"), sharded}) {
        const QString ranked = dir.path() + (placement == sharded ? "/sharded" : "/pipeline");
        QByteArray ro;
        QCOMPARE(cli({"launch", "--local-ranks", "2", "infer", "--dataset", root, "--checkpoint", ckpt, "--window", "16",
                      "--out", ranked, "--placement", placement, "--progress", "none"}, &err, &ro), 0);
        const auto rv = lines(ro);
        QCOMPARE(rv.size(), 5);
        for (int i = 0; i < 4; ++i) {
          QCOMPARE(rv[i]["case"].toString(), ids[i]);
          QCOMPARE(io::readVolume((ranked + "/" + ids[i] + ".nii.gz").toStdString()).voxels(),
                   io::readVolume((out + "/" + ids[i] + ".nii.gz").toStdString()).voxels());
          const auto planned = rv[i]["memory"].toObject()["planned"].toObject(), measured = rv[i]["memory"].toObject()["measured"].toObject();
          QVERIFY2(measured.contains("r1:cpu") && planned.contains("r1:cpu"), QJsonDocument(rv[i]).toJson().constData());
          const double got = measured["r1:cpu"].toDouble(), plan = planned["r1:cpu"].toDouble();
          qInfo("%s: r1:cpu measured %.2f MiB, planned %.2f MiB", qPrintable(ids[i]), got / 1048576, plan / 1048576);
          QVERIFY2(std::abs(got - plan) <= 0.1 * plan, qPrintable(QString("%1 vs %2").arg(got).arg(plan)));
        }
      }
    }

    // --out naming the dataset's own label folder: refused before anything is written.
    const auto hashOf = [](const QString& path) {
      QFile f(path);
      return f.open(QIODevice::ReadOnly) ? QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256) : QByteArray();
    };
    const QByteArray labelHash = hashOf(root + "/labelsTr/case_0.nii.gz");
    QVERIFY(cli({"infer", "--dataset", root, "--checkpoint", ckpt, "--out", root + "/labelsTr", "--progress", "none"}, &err) != 0);
    QVERIFY2(err.contains("would overwrite") && err.trimmed().count('\n') == 0, qPrintable(err));
    QCOMPARE(hashOf(root + "/labelsTr/case_0.nii.gz"), labelHash);
    // --dataset with --image: one line.
    QVERIFY(cli({"infer", "--dataset", root, "--image", root + "/imagesTr/case_0.nii.gz", "--checkpoint", ckpt, "--out",
                 dir.path() + "/x", "--progress", "none"}, &err) != 0);
    QVERIFY2(err.contains("leave out --image"), qPrintable(err));

    // A case that cannot be read: reported, the other three predicted and summarised, exit non-zero.
    {
      QFile f(root + "/imagesTr/case_2.nii.gz");
      QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
      f.write("not an image");
    }
    const QString out = dir.path() + "/broken";
    QByteArray o;
    QVERIFY(cli({"infer", "--dataset", root, "--checkpoint", ckpt, "--window", "16", "--out", out, "--progress", "none"},
                &err, &o) != 0);
    const auto v = lines(o);
    QCOMPARE(v.size(), 5);
    QCOMPARE(v[2]["case"].toString(), QString("case_2"));
    QVERIFY2(v[2]["error"].toString().contains("case_2.nii.gz"), qPrintable(v[2]["error"].toString()));
    QCOMPARE(v[4]["predicted"].toInt(), 3);
    QCOMPARE(v[4]["failed"].toArray().size(), 1);
    QCOMPARE(v[4]["labels"].toArray()[0].toObject()["cases"].toInt(), 3);
    QVERIFY(QFile::exists(out + "/case_3.nii.gz") && !QFile::exists(out + "/case_2.nii.gz"));
    QVERIFY2(err.contains("1 case(s) could not be predicted"), qPrintable(err));
  }

  // The run's CPU budget bounds a prediction as it bounds a training step: within it the same
  // labels as without one, beyond it one line naming the device and the CPU budget, nothing
  // written and an earlier file at --out untouched. Over two ranks every rank keeps to it: rank 0
  // (its image and windows) or a worker (the full-resolution stages), and the run then ends with
  // the error rather than waiting out the rank timeout.
  void inferWithinTheCpuBudget_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<QString>("window");
    QTest::addColumn<QString>("shortDevice");  // the device that runs out
    QTest::newRow("one process") << QString() << "16" << "cpu";
    QTest::newRow("two ranks, rank 0 short") << QString("dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu") << "16" << "cpu";
    QTest::newRow("two ranks, rank 1 short") << QString("enc0=r1:cpu,enc1=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=r1:cpu")
                                             << "0" << "r1:cpu";
  }
  void inferWithinTheCpuBudget() {
    QFETCH(QString, placement);
    QFETCH(QString, window);
    QFETCH(QString, shortDevice);
    QTemporaryDir dir;
    data::PhantomOptions po;
    po.size = {40, 32, 24};
    po.seed = 9;
    const QString image = dir.path() + "/image.nii.gz", reference = dir.path() + "/reference.nii.gz";
    io::writeVolume(data::makePhantom(po).image, image.toStdString());
    const QStringList ranks = placement.isEmpty() ? QStringList{} : QStringList{"launch", "--local-ranks", "2"};
    const auto infer = [&](const QString& out, const QString& budget, QString* err, QByteArray* o) {
      QStringList args = ranks;
      args << "infer" << "--image" << image << "--base" << "4" << "--depth" << "3" << "--intensity" << "none"
           << "--window" << window << "--out" << out << "--progress" << "none" << "--rank-timeout" << "60";
      if (!placement.isEmpty()) args << "--placement" << placement;
      if (!budget.isEmpty()) args << "--cpu-budget" << budget;
      return cli(args, err, o);
    };
    QString err;
    QByteArray o;
    QCOMPARE(infer(reference, "", &err, &o), 0);
    const auto measured = QJsonDocument::fromJson(o).object()["memory"].toObject()["measured"].toObject();
    QVERIFY2(measured.size() == (placement.isEmpty() ? 1 : 2), o.constData());
    const double first = measured["cpu"].toDouble(), other = measured["r1:cpu"].toDouble();
    const auto voxels = io::readVolume(reference.toStdString()).voxels();

    const QString within = dir.path() + "/within.nii.gz";
    QCOMPARE(infer(within, QString::number(static_cast<qint64>(std::max(first, other)) + (1 << 20)), &err, &o), 0);
    QCOMPARE(io::readVolume(within.toStdString()).voxels(), voxels);

    // Rank 1 short: between the two ranks' peaks (it needs more here); else half of rank 0's,
    // above its weights and image, below what it computes with.
    if (shortDevice == "r1:cpu") QVERIFY2(other > 1.5 * first, o.constData());
    const double budget = shortDevice == "r1:cpu" ? (first + other) / 2 : first / 2;
    const auto hashOf = [](const QString& path) {
      QFile f(path);
      return f.open(QIODevice::ReadOnly) ? QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256) : QByteArray();
    };
    const QByteArray before = hashOf(within);
    QVERIFY(infer(within, QString::number(static_cast<qint64>(budget)), &err, &o) != 0);
    qInfo("%s", qPrintable(err.trimmed()));
    QVERIFY2(err.contains("out of memory on " + shortDevice + " in stage") && err.contains("CPU budget") && !err.contains("CUDA"),
             qPrintable(err));
    QCOMPARE(err.count("out of memory on"), 1);  // one line says it (a note before it may say the plan does not fit)
    QCOMPARE(hashOf(within), before);
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
