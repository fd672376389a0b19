// Checkpointed stages must give the same outputs and gradients as plain ones, dropout included.
#include "core/engine/Recompute.h"
#include "core/model/UNet3d.h"

#include <QtTest>
#include <torch/torch.h>

#include <set>
#include <sstream>

using namespace splitseg;

Q_DECLARE_METATYPE(std::string)

namespace {

struct Run {
  torch::Tensor output;
  std::vector<torch::Tensor> grads;  // parameters, then the input
  double nextRandom = 0;             // first draw after the step: the generator must be untouched
};

Run step(model::UNet3d& net, const torch::Tensor& input, const std::set<std::string>& checkpoint,
         bool inputGrad, const std::shared_ptr<engine::OffloadChain>& offload = nullptr) {
  torch::manual_seed(1234);
  net->zero_grad();
  auto x = input.detach().clone().requires_grad_(inputGrad);
  const auto specs = net->stageSpecs();
  std::map<std::string, torch::Tensor> outs{{model::kInput, x}};
  torch::Tensor last;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::vector<torch::Tensor> in;
    for (const auto& n : specs[i].inputs) in.push_back(outs.at(n));
    if (checkpoint.count(specs[i].name) || checkpoint.count("all")) {
      auto fn = [&net, i](const std::vector<torch::Tensor>& v) { return net->runStage(i, v); };
      last = engine::runRecomputed(fn, in, net->stageModule(i)->parameters(), offload);
    } else {
      last = net->runStage(i, in);
    }
    outs[specs[i].name] = last;
  }
  // A loss that weighs voxels differently, so every gradient path matters.
  auto w = torch::linspace(-1, 1, last.numel()).view_as(last);
  (torch::sigmoid(last) * w).sum().backward();
  Run r;
  r.output = last.detach();
  for (const auto& p : net->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  if (inputGrad) r.grads.push_back(x.grad().clone());
  r.nextRandom = torch::rand({1}).item<double>();
  return r;
}

} // namespace

class RecomputeTest : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void gradientsMatch_data() {
    QTest::addColumn<QString>("stages");
    QTest::addColumn<bool>("inputGrad");
    QTest::addColumn<bool>("offload");
    QTest::newRow("all stages") << "all" << false << false;
    QTest::newRow("dropout stages") << "enc1,bottleneck" << false << false;
    QTest::newRow("decoder with skip") << "dec0" << false << false;
    QTest::newRow("first stage, input grad") << "enc0" << true << false;
    QTest::newRow("all, input grad") << "all" << true << false;
    // Host offload: the saved inputs go through host copies (CPU tensors copied too, so the
    // whole path runs without a GPU) and come back for backward, the next stage's prefetched.
    QTest::newRow("all stages, host offload") << "all" << false << true;
    QTest::newRow("decoder with skip, host offload") << "dec0" << false << true;
    QTest::newRow("all, input grad, host offload") << "all" << true << true;
  }

  void gradientsMatch() {
    QFETCH(QString, stages);
    QFETCH(bool, inputGrad);
    QFETCH(bool, offload);
    torch::manual_seed(7);
    model::UNet3d net(model::UNet3dOptions().base_channels(4).depth(3).dropout({0.5, 0.3}));
    net->train();
    const auto input = torch::randn({2, 1, 16, 16, 16});
    std::set<std::string> cp;
    std::stringstream ss(stages.toStdString());
    for (std::string s; std::getline(ss, s, ',');) cp.insert(s);

    const Run plain = step(net, input, {}, inputGrad);
    auto chain = offload ? std::make_shared<engine::OffloadChain>(engine::OffloadChain::Options{true}) : nullptr;
    const Run ckpt = step(net, input, cp, inputGrad, chain);
    if (chain) {
      // Every input of every checkpointed stage went out and came back; every backward but the
      // first found its inputs already on the way; nothing is left on the host.
      int inputs = 0, stagesCheckpointed = 0;
      for (const auto& spec : net->stageSpecs())
        if (cp.count("all") || cp.count(spec.name)) {
          inputs += static_cast<int>(spec.inputs.size());
          ++stagesCheckpointed;
        }
      QCOMPARE(chain->copiesToHost(), inputs);
      QCOMPARE(chain->copiesBack(), inputs);
      QCOMPARE(chain->prefetches(), stagesCheckpointed - 1);
      QCOMPARE(chain->hostBytes(), std::int64_t{0});
    }
    QVERIFY(torch::equal(plain.output, ckpt.output));
    QCOMPARE(plain.grads.size(), ckpt.grads.size());
    for (std::size_t i = 0; i < plain.grads.size(); ++i) {
      QVERIFY2(plain.grads[i].defined() && ckpt.grads[i].defined(), "a gradient is missing");
      QVERIFY2(torch::allclose(plain.grads[i], ckpt.grads[i], 1e-5, 1e-7),
               qPrintable(QString("gradient %1 differs by %2").arg(i).arg(
                   (plain.grads[i] - ckpt.grads[i]).abs().max().item<double>())));
    }
    QCOMPARE(plain.nextRandom, ckpt.nextRandom);
  }

  // Without the restored generator the recomputed dropout masks would differ: make sure the
  // test above would notice (the masks really are random between two draws).
  void dropoutIsRandom() {
    torch::manual_seed(3);
    auto x = torch::ones({1000});
    auto a = torch::dropout(x, 0.5, true), b = torch::dropout(x, 0.5, true);
    QVERIFY(!torch::equal(a, b));
  }

  // With offload the autograd graph holds no reference to a stage's inputs: the tensor is freed
  // as soon as the caller lets go of it. Without, the graph keeps it (the control row).
  void offloadLetsGoOfInputs_data() {
    QTest::addColumn<bool>("offload");
    QTest::newRow("saved on the device") << false;
    QTest::newRow("host offload") << true;
  }

  void offloadLetsGoOfInputs() {
    QFETCH(bool, offload);
    auto w = torch::randn({3}, torch::requires_grad());
    auto chain = std::make_shared<engine::OffloadChain>(engine::OffloadChain::Options{true});
    torch::Tensor y, values;
    c10::weak_intrusive_ptr<c10::StorageImpl> weak(c10::intrusive_ptr<c10::StorageImpl>{});
    {
      auto x = torch::randn({3}) + 0;  // a fresh tensor only this scope holds
      weak = x.storage().getWeakStorageImpl();
      values = x.clone();
      auto fn = [w](const std::vector<torch::Tensor>& v) { return v[0] * w; };
      y = engine::runRecomputed(fn, {x}, {w}, offload ? chain : nullptr);
    }
    QCOMPARE(weak.expired(), offload);
    QCOMPARE(chain->hostBytes(), offload ? std::int64_t{3 * 4} : std::int64_t{0});
    y.sum().backward();
    QVERIFY(w.grad().defined() && torch::equal(w.grad(), values));  // the input came back intact
    QCOMPARE(chain->hostBytes(), std::int64_t{0});
  }

  void inferencePassesThrough() {
    torch::NoGradGuard noGrad;
    int calls = 0;
    auto fn = [&calls](const std::vector<torch::Tensor>& v) { ++calls; return v[0] * 2; };
    auto y = engine::runRecomputed(fn, {torch::ones({3})}, {});
    QCOMPARE(calls, 1);
    QVERIFY(torch::equal(y, torch::full({3}, 2.0)));
  }
};

QTEST_GUILESS_MAIN(RecomputeTest)
#include "RecomputeTest.moc"
