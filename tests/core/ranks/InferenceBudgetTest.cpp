// The run's CPU budget bounds a prediction as it bounds a training step: ranks::PeakMeter with a
// budget lets a prediction through that stays within it (the same labels as without one), and
// turns one that goes beyond it into an OutOfMemoryError on "cpu", the network back in its mode
// and able to predict again. The budget bounds what the meter reports (the weights, the image
// and every LibTorch allocation while it runs), the figure the planner plans within the budget.
// Every row runs twice: without the host caching allocator (the budget seen after the pass that
// broke it) and with it (the allocation refused as it is made, as the CLI and the workstation run).
#include "core/base/Error.h"
#include "core/ranks/RankPeaks.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Inferer.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

using namespace splitseg;

namespace {
struct Run {
  engine::Prediction prediction;
  std::int64_t peak = 0;  // the meter's "cpu"
};

std::shared_ptr<model::StagedNetwork> network() {
  torch::manual_seed(11);
  return model::UNet3d(model::UNet3dOptions().base_channels(4).depth(3).out_channels(2)).ptr();
}

engine::InferOptions options(int window) {
  engine::InferOptions o;
  if (window > 0) o.window = {window, window, window};
  return o;
}

// A prediction measured as the CLI measures it: the stages' weights and the image held, `budget`
// (0: none) over both and the prediction's allocations.
Run predict(model::StagedNetwork& net, engine::Inferer& inferer, const torch::Tensor& image, int window,
            std::int64_t budget) {
  std::vector<torch::nn::Module*> modules;
  for (std::size_t i = 0; i < net.stageNames().size(); ++i) modules.push_back(net.stageModule(i).get());
  ranks::PeakMeter meter(-1, modules, budget);
  meter.holdOnCpu(image.numel() * image.element_size());
  Run r;
  r.prediction = inferer.predict(image, options(window));
  r.peak = meter.peaks().at("cpu");
  return r;
}

std::int64_t parameterBytes(model::StagedNetwork& net) {
  std::int64_t b = 0;
  for (const auto& p : net.root().parameters()) b += p.numel() * p.element_size();
  return b;
}
} // namespace

class InferenceBudgetTest : public QObject {
  Q_OBJECT

  void rows() {
    QTest::addColumn<int>("window");
    QTest::addColumn<QString>("budget");  // "above", "between" (input < budget < peak), "input"
    for (const int window : {0, 16}) {
      const QString how = window > 0 ? "16^3 windows" : "whole volume";
      QTest::newRow(qPrintable(how + ", budget above the peak")) << window << "above";
      QTest::newRow(qPrintable(how + ", budget below the peak")) << window << "between";
      QTest::newRow(qPrintable(how + ", budget below the weights and image")) << window << "input";
    }
  }

  void check(bool hostCache) {
    QFETCH(int, window);
    QFETCH(QString, budget);
    auto net = network();
    engine::SplitExecutor executor(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    engine::Inferer inferer(executor);
    torch::manual_seed(3);
    const auto image = torch::randn({1, 24, 20, 28});
    predict(*net, inferer, image, window, 0);  // warm-up: lazy initialisation outside the measurement
    const Run reference = predict(*net, inferer, image, window, 0);
    const std::int64_t input = parameterBytes(*net) + image.numel() * image.element_size();
    QVERIFY2(reference.peak > input + (64 << 10), "the prediction allocates too little for the rows to mean anything");
    qInfo("%s: weights and image %.1f KiB, peak %.1f KiB", hostCache ? "host cache" : "malloc", input / 1024.0,
          reference.peak / 1024.0);

    std::int64_t bytes = 0;
    if (budget == "above") bytes = reference.peak + (64 << 10);
    else if (budget == "between") bytes = input + (reference.peak - input) / 2;
    else bytes = input - 1024;

    net->root().train();  // as a network is between training steps
    if (budget == "above") {
      const Run r = predict(*net, inferer, image, window, bytes);
      QVERIFY(torch::equal(r.prediction.labels, reference.prediction.labels));
      QVERIFY(torch::equal(r.prediction.probabilities, reference.prediction.probabilities));
      QVERIFY(r.peak <= bytes);
      QVERIFY(net->root().is_training());
      return;
    }
    try {
      predict(*net, inferer, image, window, bytes);
      QFAIL("a prediction beyond the CPU budget went through");
    } catch (const OutOfMemoryError& e) {
      qInfo("%s", e.what());
      QCOMPARE(QString::fromStdString(e.device()), QString("cpu"));
      const QString what = QString::fromStdString(e.what());
      QVERIFY2(what.contains("CPU budget"), qPrintable(what));
      QVERIFY2(!what.contains("CUDA"), qPrintable(what));
      if (budget == "input") QCOMPARE(QString::fromStdString(e.stage()), QString("input"));
      else QVERIFY2(e.stage() != "input", e.stage().c_str());
    }
    QVERIFY(net->root().is_training());  // back in its mode
    // Nothing lost: the same prediction as before once the budget allows it.
    const Run again = predict(*net, inferer, image, window, 0);
    QVERIFY(torch::equal(again.prediction.labels, reference.prediction.labels));
    QVERIFY(torch::equal(again.prediction.probabilities, reference.prediction.probabilities));
  }

private Q_SLOTS:
  void withoutHostCache_data() { rows(); }
  void withoutHostCache() { check(false); }
  // Last: the cache stays installed for the rest of the process.
  void withHostCache_data() { rows(); }
  void withHostCache() {
    QVERIFY(engine::installHostCachingAllocator(std::int64_t{1} << 30));
    check(true);
  }
};

QTEST_GUILESS_MAIN(InferenceBudgetTest)
#include "InferenceBudgetTest.moc"
