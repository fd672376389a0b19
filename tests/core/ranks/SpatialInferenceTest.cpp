// Inference with every stage sharded over the ranks (ranks::SpatialInferer) equals inference in one
// process with the same weights: the ranks run as threads of this process with their own c10d
// groups on a free port of 127.0.0.1; rank 0 runs the Inferer (whole volume or sliding window),
// the others serve. Probabilities within 1e-5, labels equal.
#include "core/data/Phantom.h"
#include "core/ranks/SpatialInferer.h"
#include "core/engine/Tensors.h"
#include "core/model/UNet3d.h"
#include "tests/support/GpuChecks.h"
#include "tests/support/RanksAsThreads.h"

#include <QtTest>
#include <torch/torch.h>


using namespace splitseg;

namespace {
std::string everyStage(const std::string& entry, const std::vector<std::string>& stages) {
  std::string out;
  for (const auto& s : stages) out += (out.empty() ? "" : ",") + s + "=" + entry;
  return out;
}
} // namespace

class SpatialInferenceTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() {
    checks::allowRanksAsThreads();
    torch::set_num_threads(1);  // the ranks are threads sharing one pool
  }

  void equalsOneProcess_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<QString>("norm");
    QTest::addColumn<int>("window");  // 0: the whole volume
    QTest::addColumn<int>("batch");   // windows per forward pass
    QTest::addColumn<QString>("axis");
    QTest::newRow("2 ranks, whole volume") << 2 << "none" << 0 << 1 << "depth";
    QTest::newRow("2 ranks, whole volume, instance norm") << 2 << "instance" << 0 << 1 << "depth";
    QTest::newRow("3 ranks, sliding window, 2 windows a pass") << 3 << "instance" << 24 << 2 << "depth";
    QTest::newRow("2 ranks, cut along height, batch norm") << 2 << "batch" << 0 << 1 << "height";
  }
  void equalsOneProcess() {
    QFETCH(int, ranks);
    QFETCH(QString, norm);
    QFETCH(int, window);
    QFETCH(int, batch);
    QFETCH(QString, axis);
    checks::ExactFp32Guard exact;
    const auto options =
        model::UNet3dOptions().base_channels(4).depth(3).dropout({0, 0, 0}).norm(model::normFromString(norm.toStdString()));
    data::PhantomOptions po;
    po.size = {40, 36, 44};  // x, y, z: padded to the divisor by the Inferer, cut unevenly for 3 ranks
    const auto image = engine::toTensor(data::makePhantom(po).image).unsqueeze(0);
    engine::InferOptions io;
    if (window > 0) io.window = {window, window, window};
    io.batch = batch;

    torch::manual_seed(3);
    auto reference = std::make_shared<model::UNet3dImpl>(options);
    const auto stages = reference->stageNames();
    engine::Prediction want;
    {
      engine::SplitExecutor executor(reference, placement::Placement::uniform(stages, "cpu"));
      engine::Inferer inferer(executor);
      want = inferer.predict(image, io);
    }

    run::RunSpec spec;
    spec.rankTimeoutSeconds = 30;
    spec.shardAxis = placement::shardAxisFromString(axis.toStdString());
    std::string entry;
    for (int r = 0; r < ranks; ++r) entry += (entry.empty() ? "" : "+") + std::string("r") + std::to_string(r) + ":cpu";
    spec.setPlacement(placement::Placement::parse(everyStage(entry, stages), stages, "cpu"));
    // Rank 0 holds the weights; the others start from others and must receive rank 0's.
    std::vector<std::shared_ptr<model::UNet3dImpl>> nets;
    for (int r = 0; r < ranks; ++r) {
      torch::manual_seed(r == 0 ? 3 : 50 + r);
      nets.push_back(std::make_shared<model::UNet3dImpl>(options));
    }
    engine::Prediction got;
    const auto failures = checks::runRanksAsThreads(ranks, [&](ranks::Comm& comm, int r) {
      ranks::SpatialInferer inferer(comm, nets[static_cast<std::size_t>(r)], spec);
      if (r != 0) {
        inferer.serve();
        return;
      }
      engine::Inferer whole(inferer);
      got = whole.predict(image, io);
      inferer.finish();
    });
    for (int r = 0; r < ranks; ++r)
      QVERIFY2(failures[static_cast<std::size_t>(r)].empty(),
               qPrintable(QString("rank %1: %2").arg(r).arg(failures[static_cast<std::size_t>(r)].c_str())));
    QCOMPARE(got.probabilities.sizes(), want.probabilities.sizes());
    const double diff = (got.probabilities - want.probabilities).abs().max().item<double>();
    qInfo("%d ranks: probabilities within %.3g of one process", ranks, diff);
    QVERIFY2(diff <= 1e-5, qPrintable(QString("probabilities differ by %1").arg(diff)));
    QVERIFY(torch::equal(got.labels, want.labels));
  }

  // A window too thin to cut into one slab per rank: rank 0 says so in one line and the other
  // ranks stop at once instead of waiting out the rank timeout.
  void refusesWindowsTooThinToCut() {
    const auto options = model::UNet3dOptions().base_channels(4).depth(3).dropout({0, 0, 0});
    auto net0 = std::make_shared<model::UNet3dImpl>(options), net1 = std::make_shared<model::UNet3dImpl>(options),
         net2 = std::make_shared<model::UNet3dImpl>(options);
    const auto stages = net0->stageNames();
    run::RunSpec spec;
    spec.rankTimeoutSeconds = 30;
    spec.setPlacement(placement::Placement::parse(everyStage("r0:cpu+r1:cpu+r2:cpu", stages), stages, "cpu"));
    std::vector<std::shared_ptr<model::UNet3dImpl>> nets{net0, net1, net2};
    const auto start = std::chrono::steady_clock::now();
    const auto failures = checks::runRanksAsThreads(3, [&](ranks::Comm& comm, int r) {
      ranks::SpatialInferer inferer(comm, nets[static_cast<std::size_t>(r)], spec);
      if (r != 0) {
        inferer.serve();
        return;
      }
      engine::Inferer whole(inferer);
      engine::InferOptions io;
      io.window = {8, 8, 8};  // 8 planes: two slabs of the size divisor (4 at depth 3) at most
      whole.predict(torch::zeros({1, 16, 16, 16}), io);
    });
    const std::string& refusal = failures[0];
    const std::string others = failures[1] + failures[2];
    qInfo("refusal: %s", refusal.c_str());
    QVERIFY2(!refusal.empty(), "rank 0 ran windows it cannot cut");
    QVERIFY2(others.empty(), others.c_str());
    QVERIFY(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  }
};

QTEST_GUILESS_MAIN(SpatialInferenceTest)
#include "SpatialInferenceTest.moc"
