// The workstation opens volumes while a training run computes on other threads, and every read
// of a file runs in a fork()ed child (IsolatedRead.h) that is not exec'd: it starts with copies
// of whatever locks the parent's threads held at the fork. A child stuck on one would hang until
// the read's time limit and the read would fail. Here a network trains on a thread (with torch's
// intra-op threads busy) while this thread reads a NIfTI file again and again: every read must
// come back whole, and quickly.
#include "core/data/SampleSource.h"
#include "core/engine/Trainer.h"
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/model/UNet3d.h"

#include <QTemporaryDir>
#include <QtTest>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

using namespace splitseg;

class ReadWhileTrainingTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

private Q_SLOTS:
  void readsComeBackWhileTraining_data() {
    QTest::addColumn<int>("threads");  // torch's intra-op threads for the training
    QTest::newRow("1 intra-op thread") << 1;
    QTest::newRow("2 intra-op threads") << 2;
  }
  void readsComeBackWhileTraining() {
    QFETCH(int, threads);
    // A hung child fails its read at this limit (the default is 300 s).
    ::setenv("SPLITSEG_READ_TIMEOUT", "20", 1);
    Geometry g;
    g.size = {48, 40, 32};
    Volume v(g);
    for (std::size_t i = 0; i < v.voxels().size(); ++i) v.voxels()[i] = static_cast<float>(i % 4001) - 1000.0f;
    v.setPixelType("int16");
    const std::string file = (std::filesystem::path(dir_.path().toStdString()) / "ct.nii.gz").string();
    io::writeVolume(v, file);
    const auto want = io::readVolume(file).voxels();

    std::atomic<bool> stop{false};
    std::atomic<int> steps{0};
    std::string trainError;
    std::thread training([&] {
      try {
        torch::set_num_threads(threads);
        torch::manual_seed(3);
        auto net = model::UNet3d(model::UNet3dOptions().base_channels(8).depth(3).dropout({0, 0, 0}));
        run::RunSpec spec;
        spec.patch = {32, 32, 32};
        spec.batch = 2;
        spec.steps = 1000000;
        spec.seed = 3;
        engine::Trainer trainer(net.ptr(), std::make_shared<data::PhantomSource>(), spec);
        while (!stop) {
          trainer.step();
          ++steps;
        }
      } catch (const std::exception& e) {
        trainError = e.what();
        stop = true;
      }
    });
    // Reads start once a step has run: the training's threads exist and are working.
    while (steps < 1 && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int before = steps;
    double slowest = 0;
    int good = 0, failed = 0;
    std::string firstError;
    // At least 40 reads, and on until two steps ran beside them (at most 400).
    constexpr int kReads = 40;
    int reads = 0;
    for (; (reads < kReads || steps - before < 2) && reads < 10 * kReads && !stop; ++reads) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        if (io::readVolume(file).voxels() == want) ++good;
      } catch (const std::exception& e) {
        if (firstError.empty()) firstError = e.what();
        ++failed;
      }
      slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const int during = steps - before;
    stop = true;
    training.join();
    qInfo("%d reads while %d training steps ran (%d intra-op threads): slowest read %.3f s", good + failed,
          during, threads, slowest);
    QVERIFY2(trainError.empty(), trainError.c_str());
    QVERIFY2(failed == 0, firstError.c_str());
    QCOMPARE(good, reads);
    QVERIFY2(reads >= kReads && during >= 2, "the reads did not overlap the training");
    // A 48x40x32 NIfTI file reads in milliseconds; seconds would mean a child that waited.
    QVERIFY2(slowest < 5.0, qPrintable(QString("slowest read %1 s").arg(slowest)));
  }
};

QTEST_GUILESS_MAIN(ReadWhileTrainingTest)
#include "ReadWhileTrainingTest.moc"
