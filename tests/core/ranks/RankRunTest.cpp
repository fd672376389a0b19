// A run over ranks as the workstation starts it: rank 0 in this process (ranks::trainAsRankZero on
// a thread, as the GUI's worker thread does), rank 1 a `splitseg-cli worker` process. Stop ends
// every rank after the same step; a pause longer than the rank timeout is not taken for a dead
// rank; without a checkpoint path rank 0's network ends with every rank's trained weights, the
// same as training in one process. Inference over ranks (ranks::inferAsRankZero, as the review
// runs it) equals one process, and a review stopped between windows lets the worker go at once.
#include "core/data/SampleSource.h"
#include "core/ranks/RankRun.h"
#include "core/engine/Inferer.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/Trainer.h"
#include "core/plugin/PluginRegistry.h"
#include "core/ranks/RankEnv.h"
#include "core/shard/ShardNorm3d.h"
#include "tests/support/PoisonedSource.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QProcess>
#include <QtTest>

#include <torch/torch.h>

#include <atomic>
#include <filesystem>
#include <limits>
#include <chrono>
#include <set>
#include <thread>

using namespace splitseg;

namespace {
const char* kPlacement = "enc0=cpu,enc1=cpu,bottleneck=r1:cpu,dec1=r1:cpu,dec0=r1:cpu,head=cpu";
const char* kSharded = "enc0=r0:cpu+r1:cpu,enc1=r0:cpu+r1:cpu,bottleneck=r0:cpu+r1:cpu,dec1=r0:cpu+r1:cpu,"
                       "dec0=r0:cpu+r1:cpu,head=r0:cpu+r1:cpu";

run::RunSpec tinyRun(int steps, int timeoutSeconds) {
  run::RunSpec spec;
  spec.architecture = "unet3d";
  spec.networkOptions = {{"base_channels", 4}, {"depth", 3}, {"dropout", {0.0, 0.0, 0.0}}};
  spec.patch = {16, 16, 16};
  spec.batch = 2;
  spec.steps = steps;
  spec.seed = 3;
  spec.learningRate = 0.01;
  spec.rankTimeoutSeconds = timeoutSeconds;
  return spec;
}

std::shared_ptr<model::StagedNetwork> build(run::RunSpec& spec, const char* placement = kPlacement) {
  torch::manual_seed(spec.seed);
  auto net = plugin::PluginRegistry::instance().create(spec.architecture, spec.networkOptions.dump());
  spec.setPlacement(placement::Placement::parse(placement, net->stageNames(), "cpu"));
  return net;
}

// Stops the run at its first progress report (after the first batch of windows).
class StopAtFirstWindow final : public ProgressSink {
public:
  explicit StopAtFirstWindow(CancelToken& token) : token_(token) {}
  void progress(double, const std::string&) override { token_.cancel(); }

private:
  CancelToken& token_;
};

// Counts steps; calls `onStep` (on rank 0's thread) after each.
class Steps final : public engine::MetricsSink {
public:
  std::function<void(int)> onStepDone;
  std::atomic<int> count{0};
  void onStep(const engine::StepMetrics&) override {
    const int n = ++count;
    if (onStepDone) onStepDone(n);
  }
};

const char* kSecret = "RankRunTest's run secret, 32 chars";

struct Worker {
  QProcess process;
  explicit Worker(int port) {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", QString::number(port));
    env.insert("RANK", "1");
    env.insert("LOCAL_RANK", "1");
    env.insert("WORLD_SIZE", "2");
    env.insert("OMP_NUM_THREADS", "1");
    env.insert("TORCH_CPP_LOG_LEVEL", "ERROR");
    env.insert("SPLITSEG_RUN_SECRET", kSecret);
    process.setProcessEnvironment(env);
    process.start(SPLITSEG_CLI, {"worker"});
  }
  // Exit status, or -1 when it is still running after `ms`.
  int finish(int ms) {
    if (!process.waitForFinished(ms)) {
      process.kill();
      process.waitForFinished();
      return -1;
    }
    return process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -2;
  }
  QByteArray err() { return process.readAllStandardError(); }
};

ranks::RankEnv rankZero(int port) {
  ranks::RankEnv env;
  env.masterPort = port;
  env.worldSize = 2;
  env.secret = kSecret;
  return env;
}
} // namespace

class RankRunTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() {
    // One thread everywhere, rank 0 included (it takes engine::rankThreads): rankZeroEndsWithEvery-
    // StageTrained compares its weights with one process's to 1e-5.
    torch::set_num_threads(1);
    qputenv("OMP_NUM_THREADS", "1");
  }

  void stopEndsEveryRank_data() {
    QTest::addColumn<int>("stopAfter");
    QTest::newRow("after step 1") << 1;
    QTest::newRow("after step 2") << 2;
  }
  void stopEndsEveryRank() {
    QFETCH(int, stopAfter);
    auto spec = tinyRun(8, 20);
    auto net = build(spec);
    const int port = ranks::freeLocalPort();
    Worker worker(port);
    CancelToken cancel;
    Steps sink;
    sink.onStepDone = [&](int n) {
      if (n == stopAfter) cancel.cancel();
    };
    std::string error;
    std::thread zero([&] {
      try {
        ranks::trainAsRankZero(rankZero(port), spec, net, std::make_shared<data::PhantomSource>(), "", &sink, &cancel);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    zero.join();
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(sink.count.load(), stopAfter);
    const int code = worker.finish(30000);
    QVERIFY2(code == 0, worker.err().constData());
  }

  // Stop pressed while a worker has not joined (the GUI waiting for a remote host): rank 0 stops
  // at once with Cancelled, not after the rank timeout; without a stop the wait ends with the
  // timeout's line naming the missing rank.
  void stopDuringRendezvous_data() {
    QTest::addColumn<bool>("stop");
    QTest::newRow("stopped") << true;
    QTest::newRow("not stopped") << false;
  }
  void stopDuringRendezvous() {
    QFETCH(bool, stop);
    auto spec = tinyRun(3, stop ? 120 : 2);
    auto net = build(spec);
    const int port = ranks::freeLocalPort();  // no worker is started
    CancelToken cancel;
    std::string error;
    bool cancelled = false;
    std::atomic<bool> done{false};
    std::thread zero([&] {
      try {
        ranks::trainAsRankZero(rankZero(port), spec, net, std::make_shared<data::PhantomSource>(), "", nullptr, &cancel);
      } catch (const Cancelled&) {
        cancelled = true;
      } catch (const std::exception& e) {
        error = e.what();
      }
      done = true;
    });
    if (stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel.cancel();
    }
    // Far below the 120 s timeout of the stopped row; the other row's timeout is 2 s.
    for (int i = 0; i < 300 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const bool finished = done.load();
    if (!finished) cancel.cancel();  // let the thread end before failing
    zero.join();
    QVERIFY2(finished, "rank 0 still waited for the missing rank 30 s later");
    QCOMPARE(cancelled, stop);
    if (!stop) QVERIFY2(error.find("rank 1 did not join within") != std::string::npos, error.c_str());
  }

  // Paused for twice the rank timeout: rank 0 keeps rank 1 waiting with a message every second.
  void pauseOutlastsTheRankTimeout() {
    auto spec = tinyRun(3, 2);
    auto net = build(spec);
    const int port = ranks::freeLocalPort();
    Worker worker(port);
    CancelToken cancel;
    Steps sink;
    std::chrono::steady_clock::time_point paused;
    sink.onStepDone = [&](int n) {
      if (n != 1) return;
      cancel.pause();
      paused = std::chrono::steady_clock::now();
    };
    std::thread resumer([&] {
      while (!cancel.paused()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::seconds(4));
      cancel.resume();
    });
    std::string error;
    try {
      ranks::trainAsRankZero(rankZero(port), spec, net, std::make_shared<data::PhantomSource>(), "", &sink, &cancel);
    } catch (const std::exception& e) {
      error = e.what();
    }
    resumer.join();
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(sink.count.load(), 3);
    const double pausedFor =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - paused).count();
    QVERIFY2(pausedFor >= 4.0, qPrintable(QString::number(pausedFor)));
    const int code = worker.finish(30000);
    QVERIFY2(code == 0, worker.err().constData());
  }

  // Rank 0 predicts through ranks::inferAsRankZero with a `splitseg-cli worker` as rank 1: the same
  // probabilities as one process. Stopped after the first windows, rank 0 leaves with Cancelled
  // and the worker exits cleanly at once, not after the rank timeout (60 s here).
  void inferenceOverRanks_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<bool>("stop");
    QTest::addColumn<int>("micro");    // micro-batches over the ranks
    QTest::addColumn<int>("windows");  // windows per forward pass
    QTest::newRow("pipeline") << QString(kPlacement) << false << 1 << 1;
    QTest::newRow("pipeline, stopped") << QString(kPlacement) << true << 1 << 1;
    // 27 windows as passes of 4 (the last of 3): parts of 2 and 2 (1, 1 and 1 in the last pass).
    QTest::newRow("pipeline, 2 micro-batches") << QString(kPlacement) << false << 2 << 4;
    QTest::newRow("pipeline, 3 micro-batches, stopped") << QString(kPlacement) << true << 3 << 4;
    QTest::newRow("every stage sharded") << QString(kSharded) << false << 1 << 1;
    QTest::newRow("every stage sharded, stopped") << QString(kSharded) << true << 1 << 1;
  }
  void inferenceOverRanks() {
    QFETCH(QString, placement);
    QFETCH(bool, stop);
    QFETCH(int, micro);
    QFETCH(int, windows);
    auto spec = tinyRun(1, 60);
    spec.batch = windows;
    spec.microBatches = micro;
    const auto where = placement.toStdString();
    auto net = build(spec, where.c_str());
    net->root().eval();
    torch::manual_seed(11);
    const auto image = torch::rand({1, 32, 32, 32});
    engine::InferOptions o;
    o.window = {16, 16, 16};
    o.overlap = 0.5;  // 27 windows
    o.batch = windows;

    auto oneProcess = build(spec, where.c_str());
    oneProcess->root().eval();
    engine::SplitExecutor executor(oneProcess, placement::Placement::uniform(oneProcess->stageNames(), "cpu"),
                                   spec.precision);
    engine::Prediction expected;
    {
      torch::NoGradGuard noGrad;
      expected = engine::Inferer(executor).predict(image, o);
    }

    const int port = ranks::freeLocalPort();
    Worker worker(port);
    CancelToken cancel;
    StopAtFirstWindow stopper(cancel);
    engine::Prediction got;
    bool cancelled = false;
    std::string error;
    try {
      torch::NoGradGuard noGrad;
      ranks::inferAsRankZero(rankZero(port), spec, net, [&](engine::Inferer& inferer) {
        got = inferer.predict(image, o, stop ? &stopper : nullptr, &cancel);
      });
    } catch (const Cancelled&) {
      cancelled = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
    QElapsedTimer clock;
    clock.start();
    const int code = worker.finish(30000);
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(cancelled, stop);
    QVERIFY2(code == 0, worker.err().constData());
    QVERIFY2(clock.elapsed() < 10000, qPrintable(QString("the worker exited %1 ms after rank 0").arg(clock.elapsed())));
    if (stop) return;
    const double worst = (got.probabilities - expected.probabilities).abs().max().item<double>();
    qInfo("largest probability difference to one process: %.3g", worst);
    QVERIFY2(worst < 1e-5, qPrintable(QString::number(worst)));
    QVERIFY(torch::equal(got.labels, expected.labels));
  }

  // Rank 0 fails inside a pass (its own first convolution throws): the exception leaves at once,
  // and the worker, waiting inside the pass, stops when rank 0's connection closes. Letting the
  // worker go as between passes would have kept rank 0 at the end-of-inference barrier until the
  // worker's rank timeout (60 s here) ran out.
  void failureInsidePassLeavesAtOnce() {
    auto spec = tinyRun(1, 60);
    auto net = build(spec);
    net->root().eval();
    {
      torch::NoGradGuard noGrad;
      net->stageModule(0)->parameters().front().set_data(torch::zeros({1}));  // enc0, rank 0's own
    }
    engine::InferOptions o;
    o.window = {16, 16, 16};
    const int port = ranks::freeLocalPort();
    Worker worker(port);
    QElapsedTimer clock;
    clock.start();
    std::string error;
    try {
      torch::NoGradGuard noGrad;
      ranks::inferAsRankZero(rankZero(port), spec, net,
                            [&](engine::Inferer& inferer) { inferer.predict(torch::rand({1, 32, 32, 32}), o); });
    } catch (const std::exception& e) {
      error = e.what();
    }
    const qint64 took = clock.elapsed();
    QVERIFY2(!error.empty(), "rank 0's broken stage did not throw");
    qInfo("rank 0 left %.1f s after it started (%s)", took / 1000.0, error.substr(0, 80).c_str());
    QVERIFY2(took < 20000, qPrintable(QString::number(took)));
    QVERIFY(worker.finish(30000) != 0);  // rank 0 closed the connection in the middle of a pass
  }

  // No checkpoint path: rank 1's stages come back into rank 0's network, trained as in one process.
  void rankZeroEndsWithEveryStageTrained() {
    auto spec = tinyRun(3, 20);
    auto net = build(spec);
    const auto initial = net->root().named_parameters();
    std::map<std::string, torch::Tensor> before;
    for (const auto& p : initial) before[p.key()] = p.value().detach().clone();
    const int port = ranks::freeLocalPort();
    Worker worker(port);
    ranks::trainAsRankZero(rankZero(port), spec, net, std::make_shared<data::PhantomSource>(), "", nullptr);
    QCOMPARE(worker.finish(30000), 0);

    auto single = tinyRun(3, 20);
    auto reference = build(single);
    single.setPlacement(placement::Placement::uniform(reference->stageNames(), "cpu"));
    engine::Trainer(reference, std::make_shared<data::PhantomSource>(), single).run();

    auto trained = reference->root().named_parameters();
    // A convolution's bias before an instance norm has no gradient but rounding, which Adam turns
    // into steps of the learning rate whose sign follows the order of the kernels' sums (0.017
    // after 3 steps on an AVX2 host): it cannot change an output, so it is not compared. Its
    // rounding reaches the other weights' small gradients, which Adam scales up too (1.4e-5 there,
    // 0 on AVX-512): they are compared to 1% of how far the weights moved.
    std::set<std::string> beforeNorm;
    const auto modules = net->root().named_modules();
    for (const auto& m : modules) {
      const auto dot = m.key().rfind('.');
      if (dot == std::string::npos || !m.value()->as<shard::ShardInstanceNorm3dImpl>()) continue;
      const int index = std::stoi(m.key().substr(dot + 1));
      if (index > 0) beforeNorm.insert(m.key().substr(0, dot + 1) + std::to_string(index - 1) + ".bias");
    }
    QVERIFY(!beforeNorm.empty());
    double worst = 0, moved = 0, scale = 0;
    std::string worstName;
    for (const auto& p : net->root().named_parameters()) {
      if (beforeNorm.count(p.key())) continue;
      const auto here = p.value().detach().cpu();
      const double d = (here - trained[p.key()].detach().cpu()).abs().max().item<double>();
      if (d > worst) worst = d, worstName = p.key();
      scale = std::max(scale, (here - before[p.key()]).abs().max().item<double>());
      if (p.key().rfind("dec0", 0) == 0 || p.key().rfind("bottleneck", 0) == 0)
        moved = std::max(moved, (here - before[p.key()]).abs().max().item<double>());
    }
    QVERIFY2(moved > 1e-4, qPrintable(QString("rank 1's stages did not change in rank 0's network (%1)").arg(moved)));
    QVERIFY2(worst < 0.01 * scale, qPrintable(QString("largest weight difference to one process: %1 (%2), weights moved up to %3")
                                                   .arg(worst).arg(worstName.c_str()).arg(scale)));
  }

  // A NaN step over ranks is refused on every rank, and the run keeps the last good state in its
  // checkpoint before it stops, as one process does (TrainerTest::nonFiniteLossKeepsTheLastGoodState):
  // the checkpoint holds step 2 with every stage's weights trained and finite, and the worker ends
  // by itself with the same message.
  void nonFiniteLossKeepsTheLastGoodCheckpoint_data() {
    QTest::addColumn<QString>("placement");
    QTest::newRow("pipeline") << QString(kPlacement);
    QTest::newRow("every stage sharded") << QString(kSharded);
  }
  void nonFiniteLossKeepsTheLastGoodCheckpoint() {
    QFETCH(QString, placement);
    auto spec = tinyRun(6, 20);
    QTemporaryDir dir;
    spec.checkpoint = dir.filePath("run.pt").toStdString();
    auto net = build(spec, placement.toUtf8().constData());
    std::map<std::string, torch::Tensor> before;
    for (const auto& p : net->root().named_parameters()) before[p.key()] = p.value().detach().clone();
    auto source = std::make_shared<testing::PoisonedSource>();
    source->poisonAt = 5;  // the first sample of step 3 (batches of 2)
    source->imageValue = std::numeric_limits<float>::quiet_NaN();
    const int port = ranks::freeLocalPort();
    Worker worker(port);
    Steps sink;
    std::string error;
    try {
      ranks::trainAsRankZero(rankZero(port), spec, net, source, "", &sink);
    } catch (const engine::NonFiniteLoss& e) {
      error = e.what();
    }
    QVERIFY2(error.find("step 3: the loss") != std::string::npos, error.c_str());
    QCOMPARE(sink.count.load(), 2);
    QVERIFY2(worker.finish(30000) > 0, "the worker did not end by itself with an error");
    QVERIFY2(worker.err().contains("step 3: the loss"), "the worker's last line does not name the refused step");

    QVERIFY2(std::filesystem::exists(spec.checkpoint), "no checkpoint after the refused step");
    engine::CheckpointInfo info;
    auto saved = engine::loadNetwork(spec.checkpoint, &info);
    QCOMPARE(info.step, std::int64_t(2));
    double moved = 0;
    for (const auto& p : saved->root().named_parameters()) {
      const auto w = p.value().detach();
      QVERIFY2(torch::isfinite(w).all().item<bool>(), p.key().c_str());
      if (p.key().rfind("dec0", 0) == 0) moved = std::max(moved, (w - before[p.key()]).abs().max().item<double>());
    }
    QVERIFY2(moved > 1e-4, "rank 1's stages in the checkpoint are not trained");
  }
};

QTEST_GUILESS_MAIN(RankRunTest)
#include "RankRunTest.moc"
