// The run launcher (core/launch): which execution mode a placement takes on how many ranks (the
// one place that decides it), and a resumed run that reads its checkpoint file once, as
// `splitseg-cli train --resume` runs it (launch::checkpointToResume, then launch::train).
#include "core/checkpoint/CheckpointFile.h"
#include "core/data/SampleSource.h"
#include "core/engine/Trainer.h"
#include "core/launch/RunLauncher.h"
#include "core/plugin/PluginRegistry.h"

#include <QTemporaryDir>
#include <QtTest>

#include <torch/torch.h>

using namespace splitseg;

namespace {
run::RunSpec tinyRun(int steps) {
  run::RunSpec spec;
  spec.architecture = "unet3d";
  spec.networkOptions = {{"base_channels", 4}, {"depth", 3}, {"dropout", {0.0, 0.0, 0.0}}};
  spec.patch = {16, 16, 16};
  spec.batch = 1;
  spec.steps = steps;
  spec.seed = 5;
  spec.learningRate = 0.01;
  return spec;
}

std::shared_ptr<model::StagedNetwork> build(const run::RunSpec& spec) {
  torch::manual_seed(spec.seed);
  return plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
}
} // namespace

Q_DECLARE_METATYPE(ranks::ExecutionMode)

class RunLauncherTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(1); }

  void modeOfPlacement_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<int>("worldSize");
    QTest::addColumn<ranks::ExecutionMode>("mode");
    const QString pipeline = "enc0=cpu,enc1=cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=cpu";
    const QString sharded = "enc0=r0:cpu+r1:cpu,enc1=r0:cpu+r1:cpu,bottleneck=r0:cpu+r1:cpu,dec1=r0:cpu+r1:cpu,"
                            "dec0=r0:cpu+r1:cpu,head=r0:cpu+r1:cpu";
    QTest::newRow("one process") << "enc0=cpu,enc1=cpu,bottleneck=cpu,dec1=cpu,dec0=cpu,head=cpu" << 1
                                 << ranks::ExecutionMode::OneProcess;
    QTest::newRow("ranks named, one process") << pipeline << 1 << ranks::ExecutionMode::OneProcess;
    QTest::newRow("pipeline") << pipeline << 2 << ranks::ExecutionMode::Pipeline;
    QTest::newRow("every stage sharded") << sharded << 2 << ranks::ExecutionMode::Sharded;
    QTest::newRow("sharded over 2 of 3 ranks") << sharded << 3 << ranks::ExecutionMode::Pipeline;
    QTest::newRow("one stage sharded")
        << "enc0=r0:cpu+r1:cpu,enc1=cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=cpu" << 2
        << ranks::ExecutionMode::Pipeline;
  }
  void modeOfPlacement() {
    QFETCH(QString, placement);
    QFETCH(int, worldSize);
    QFETCH(ranks::ExecutionMode, mode);
    auto spec = tinyRun(1);
    auto net = build(spec);
    spec.setPlacement(placement::Placement::parse(placement.toStdString(), net->stageNames(), "cpu"));
    ranks::RankEnv env;
    env.worldSize = worldSize;
    QCOMPARE(QString::fromStdString(ranks::toString(launch::modeOf(spec, *net, env))), QString::fromStdString(ranks::toString(mode)));
  }

  // Resuming reads the checkpoint file once: the resumed run's description and the trainer's
  // state come from the same read; the run then goes on to its total.
  void resumeReadsTheCheckpointOnce() {
    QTemporaryDir dir;
    auto first = tinyRun(2);
    first.checkpoint = dir.filePath("run.pt").toStdString();
    auto net = build(first);
    first.setPlacement(placement::Placement::uniform(net->stageNames(), "cpu"));
    launch::train(first, net, std::make_shared<data::PhantomSource>(), {});

    const auto before = checkpoint::CheckpointFile::readsSoFar();
    const auto resumed = launch::checkpointToResume(first.checkpoint);
    auto spec = resumed->info.run;
    spec.steps = 4;
    auto again = build(spec);
    launch::Launch how;
    how.resume = first.checkpoint;
    how.resumeFile = resumed;
    launch::train(spec, again, std::make_shared<data::PhantomSource>(), how);
    QCOMPARE(checkpoint::CheckpointFile::readsSoFar() - before, std::int64_t(1));
    QCOMPARE(engine::readCheckpointInfo(first.checkpoint).step, std::int64_t(4));

    // Without the file read ahead the trainer reads it itself: the counter counts every read.
    const auto plain = checkpoint::CheckpointFile::readsSoFar();
    launch::Launch reread;
    reread.resume = first.checkpoint;
    spec.steps = 5;
    launch::train(spec, build(spec), std::make_shared<data::PhantomSource>(), reread);
    QCOMPARE(checkpoint::CheckpointFile::readsSoFar() - plain, std::int64_t(1));
  }
};

QTEST_GUILESS_MAIN(RunLauncherTest)
#include "RunLauncherTest.moc"
