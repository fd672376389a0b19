// Sharded stages: a stage cut into slabs over several devices, with halos before every 3x3x3
// convolution and whole-volume statistics in the normalisation layers, must compute exactly what
// the unsharded stage computes. The reference is the same network run unsharded (plain LibTorch
// layers, padding instead of halos); the sharded side goes through the executor's scatter, the
// slab threads, the exchanges and the gather. On a machine without GPUs the placements' devices
// (cuda:0..2) stand in on the CPU (SPLITSEG_STAND_INS): the slabs are still separate tensors on
// separate threads; the GPU kit runs cpu+cuda:0 rows.
#include "core/base/Error.h"
#include "core/data/Phantom.h"
#include "core/engine/Inferer.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/ThreadShardGroup.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"
#include "core/shard/HaloConv3d.h"
#include "tests/support/GpuChecks.h"

#include <QtTest>
#include <torch/torch.h>

#include <numeric>
#include <thread>

using namespace splitseg;

namespace {
const char* kStandIns = "cuda:0=cpu,cuda:1=cpu,cuda:2=cpu";

model::UNet3dOptions tiny(model::Norm norm) {
  return model::UNet3dOptions().base_channels(4).depth(4).dropout({0.0, 0.0, 0.0}).norm(norm).out_channels(2);
}

std::string allStages(const std::string& entry, const std::vector<std::string>& stages) {
  std::string out;
  for (const auto& s : stages) out += (out.empty() ? "" : ",") + s + "=" + entry;
  return out;
}

struct Result {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

Result forwardBackward(engine::SplitExecutor& exec, model::StagedNetwork& net, const torch::Tensor& x,
                       const torch::Tensor& target) {
  net.root().zero_grad();
  Result r;
  r.out = exec.forward(x);
  (r.out - target).pow(2).mean().backward();
  for (const auto& p : net.root().parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return r;
}
} // namespace

class ShardingTest : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { qputenv("SPLITSEG_STAND_INS", kStandIns); }

  void equivalence_data() {
    QTest::addColumn<QString>("placement");  // "*" = every stage
    QTest::addColumn<QString>("norm");
    QTest::addColumn<QList<int>>("size");    // D, H, W
    QTest::addColumn<QString>("axis");
    QTest::addColumn<QList<int>>("slabs");   // explicit slab sizes, or empty
    QTest::addColumn<bool>("recompute");
    QTest::addColumn<bool>("offload");  // recomputed slabs saved through host copies
    const QString two = "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1";
    const QString three = "enc0=cuda:0+cuda:1+cuda:2,dec0=cuda:0+cuda:1+cuda:2";
    QTest::newRow("2 shards, full-resolution stages") << two << "none" << QList<int>{32, 32, 32} << "depth" << QList<int>{} << false << false;
    QTest::newRow("3 shards, uneven (14/14/12)") << three << "none" << QList<int>{40, 16, 24} << "depth" << QList<int>{} << false << false;
    QTest::newRow("2 shards, explicit 10/30") << two << "none" << QList<int>{40, 16, 16} << "depth" << QList<int>{10, 30} << false << false;
    QTest::newRow("odd sizes, height axis") << three << "none" << QList<int>{16, 40, 24} << "height" << QList<int>{} << false << false;
    QTest::newRow("width axis") << two << "none" << QList<int>{16, 16, 24} << "width" << QList<int>{} << false << false;
    QTest::newRow("every stage, 2 shards") << "*cuda:0+cuda:1" << "none" << QList<int>{32, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("every stage, 3 shards, uneven") << "*cuda:0+cuda:1+cuda:2" << "none" << QList<int>{40, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("instance norm, 2 shards") << two << "instance" << QList<int>{32, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("instance norm, 3 shards, every stage") << "*cuda:0+cuda:1+cuda:2" << "instance" << QList<int>{48, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("batch norm, 3 shards") << three << "batch" << QList<int>{24, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("checkpointed, instance norm") << two << "instance" << QList<int>{32, 16, 16} << "depth" << QList<int>{} << true << false;
    QTest::newRow("checkpointed, every stage, 3 shards") << "*cuda:0+cuda:1+cuda:2" << "none" << QList<int>{24, 16, 16} << "depth" << QList<int>{} << true << false;
    // Differently sharded neighbours: enc0's slabs are gathered and cut again for dec0.
    QTest::newRow("different groups gather and scatter") << "enc0=cuda:0+cuda:1,enc1=cuda:2,dec1=cuda:1+cuda:2,dec0=cuda:2+cuda:0+cuda:1"
                                                        << "instance" << QList<int>{24, 16, 16} << "depth" << QList<int>{} << false << false;
    QTest::newRow("checkpointed, host offload, 3 shards") << "*cuda:0+cuda:1+cuda:2" << "instance" << QList<int>{24, 16, 16}
                                                          << "depth" << QList<int>{} << true << true;
  }
  void equivalence() {
    QFETCH(QString, placement);
    QFETCH(QString, norm);
    QFETCH(QList<int>, size);
    QFETCH(QString, axis);
    QFETCH(QList<int>, slabs);
    QFETCH(bool, recompute);
    QFETCH(bool, offload);
    checks::ExactFp32Guard exact;
    torch::manual_seed(3);
    auto holder = model::UNet3d(tiny(model::normFromString(norm.toStdString())));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    const auto stages = net->stageNames();
    const auto x = torch::randn({2, 1, size[0], size[1], size[2]});
    const auto target = torch::rand({2, 2, size[0], size[1], size[2]});

    engine::SplitExecutor plain(net, placement::Placement::uniform(stages, "cpu"));
    const Result ref = forwardBackward(plain, *net, x, target);

    const std::string text = placement.startsWith('*') ? allStages(placement.mid(1).toStdString(), stages)
                                                       : placement.toStdString();
    auto plan = placement::Placement::parse(text, stages, "cpu");
    QVERIFY(plan.anySharded());
    std::set<std::string> checkpointed;
    if (recompute)
      for (const auto& s : stages)
        if (plan.isSharded(s)) checkpointed.insert(s);
    engine::SplitExecutor sharded(net, plan, {}, checkpointed);
    std::map<std::string, std::vector<std::int64_t>> sizes;
    if (!slabs.isEmpty()) sizes[plan.entryOf("enc0")] = std::vector<std::int64_t>(slabs.begin(), slabs.end());
    sharded.setSharding(placement::shardAxisFromString(axis.toStdString()), sizes);
    sharded.setOffload(offload, engine::OffloadChain::Options{true});
    // A sharded stage's slab threads really ran: every sharded stage reported slab-sized outputs.
    std::map<std::string, std::int64_t> seenExtent;
    const int dim = 2 + static_cast<int>(sharded.shardAxis());
    sharded.setOutputObserver([&](const std::string& stage, const torch::Tensor& out) { seenExtent[stage] = out.size(dim); });
    const Result got = forwardBackward(sharded, *net, x, target);
    for (const auto& s : stages) {
      const auto spec = net->stageSpecs()[std::find(stages.begin(), stages.end(), s) - stages.begin()];
      const std::int64_t full = x.size(dim) >> spec.level;
      if (plan.isSharded(s)) QVERIFY2(seenExtent.at(s) < full, qPrintable(QString::fromStdString(s + " was not cut into slabs")));
      else QCOMPARE(seenExtent.at(s), full);
    }

    const auto o = checks::compare(got.out, ref.out, 1e-5, 1e-5);
    QVERIFY2(o.within, qPrintable(QString("output max abs diff %1").arg(o.maxAbs)));
    QCOMPARE(got.grads.size(), ref.grads.size());
    double worst = 0;
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      QVERIFY2(got.grads[i].defined() && ref.grads[i].defined(), "a parameter got no gradient");
      const auto c = checks::compare(got.grads[i], ref.grads[i], 1e-5, 1e-5);
      worst = std::max(worst, c.maxAbs);
      QVERIFY2(c.within, qPrintable(QString("gradient %1 max abs diff %2").arg(i).arg(c.maxAbs)));
    }
    qInfo("output max abs diff %.3g, worst gradient max abs diff %.3g", o.maxAbs, worst);
    if (offload) {
      // Every recomputed stage's slabs went to the host and came back.
      const auto chain = sharded.lastOffload();
      QVERIFY(chain);
      QVERIFY(chain->copiesToHost() >= static_cast<int>(stages.size()));
      QCOMPARE(chain->copiesBack(), chain->copiesToHost());
      QCOMPARE(chain->hostBytes(), std::int64_t{0});
    }
  }

  // Which convolutions HaloConv3d hands to oneDNN itself: on the CPU in fp32 at batch 1 where
  // LibTorch's size test (N*C*D*H <= 20480) picks vol2col for the part but oneDNN for the whole
  // (`whole` times larger: slabs along D or H, a micro-batch's batch).
  void oneDnnChoice_data() {
    QTest::addColumn<QList<int>>("input");  // N, C, D, H, W
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("whole");
    QTest::addColumn<int>("threads");
    QTest::addColumn<QString>("how");       // "", "channels-last", "bf16"
    QTest::addColumn<bool>("oneDnn");
    const QList<int> small{1, 16, 18, 48, 8}, big{1, 16, 32, 48, 8};
    QTest::newRow("slab of 2") << small << 3 << 2 << 1 << QString() << true;
    QTest::newRow("micro-batch of 4") << small << 3 << 4 << 1 << QString() << true;
    QTest::newRow("whole: LibTorch's vol2col") << small << 3 << 1 << 1 << QString() << false;
    QTest::newRow("whole still small") << QList<int>{1, 256, 4, 4, 4} << 3 << 4 << 1 << QString() << false;
    QTest::newRow("bottleneck 4^3 of batch 8") << QList<int>{1, 256, 4, 4, 4} << 3 << 8 << 1 << QString() << true;
    QTest::newRow("part large: LibTorch picks oneDNN") << big << 3 << 4 << 1 << QString() << false;
    QTest::newRow("batch 2: LibTorch picks oneDNN") << QList<int>{2, 16, 18, 48, 8} << 3 << 2 << 1 << QString() << false;
    QTest::newRow("1x1x1, 1 thread: native for the whole too") << small << 1 << 4 << 1 << QString() << false;
    QTest::newRow("1x1x1, 2 threads") << small << 1 << 4 << 2 << QString() << true;
    QTest::newRow("channels-last: LibTorch's path") << small << 3 << 4 << 1 << QString("channels-last") << false;
    QTest::newRow("bf16: oneDNN already") << small << 3 << 4 << 1 << QString("bf16") << false;
  }
  void oneDnnChoice() {
    QFETCH(QList<int>, input);
    QFETCH(int, kernel);
    QFETCH(int, whole);
    QFETCH(int, threads);
    QFETCH(QString, how);
    QFETCH(bool, oneDnn);
    auto x = torch::zeros(std::vector<std::int64_t>(input.begin(), input.end()));
    auto w = torch::zeros({16, input[1], kernel, kernel, kernel});
    if (how == "channels-last") x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
    if (how == "bf16") x = x.to(torch::kBFloat16), w = w.to(torch::kBFloat16);
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    const bool got = shard::callsOneDnn(x, w, whole);
    at::set_num_threads(before);
    QCOMPARE(got, oneDnn);
  }

  // A micro-batch of one sample inside a WholeBatchScope runs oneDNN itself (its batch's kernel),
  // forward and backward, against a float64 reference: output and input/weight/bias gradients,
  // with strides, padding and no bias too. A weight gradient sums 10^3-10^4 products, so two fp32
  // kernels summing in different orders differ by more than 1e-5 on elements near zero; each
  // result is held to 1e-5 of its tensor's largest magnitude (a gradient scaled by 1.001 fails).
  // Inference (no grad) takes the forward alone; outside the scope LibTorch chooses.
  void microBatchRunsItsBatchKernel_data() {
    QTest::addColumn<QList<int>>("input");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("padding");
    QTest::addColumn<bool>("bias");
    QTest::newRow("16 ch, 12^3, pad 1") << QList<int>{1, 16, 12, 12, 12} << 1 << 1 << true;
    QTest::newRow("5 ch, odd 7x9x11, pad 1") << QList<int>{1, 5, 7, 9, 11} << 1 << 1 << true;
    QTest::newRow("8 ch, stride 2, pad 0") << QList<int>{1, 8, 9, 10, 11} << 2 << 0 << true;
    QTest::newRow("no bias") << QList<int>{1, 8, 10, 10, 10} << 1 << 1 << false;
  }
  void microBatchRunsItsBatchKernel() {
    QFETCH(QList<int>, input);
    QFETCH(int, stride);
    QFETCH(int, padding);
    QFETCH(bool, bias);
    checks::ExactFp32Guard exact;
    torch::manual_seed(3);
    shard::HaloConv3d conv(torch::nn::Conv3dOptions(input[1], 6, 3).stride(stride).padding(padding).bias(bias));
    const auto x = torch::randn(std::vector<std::int64_t>(input.begin(), input.end())).requires_grad_();
    const std::int64_t batch = 20480 / (input[1] * input[2] * input[3]) + 1;  // the whole batch picks oneDNN
    QVERIFY(!shard::callsOneDnn(x, conv->weight, 1));
    QVERIFY(shard::callsOneDnn(x, conv->weight, batch));
    shard::WholeBatchScope whole(batch);
    const auto out = conv(x);
    std::vector<torch::Tensor> of{x, conv->weight};
    if (bias) of.push_back(conv->bias);
    std::vector<torch::Tensor> of64;
    for (const auto& t : of) of64.push_back(t.detach().to(torch::kDouble).requires_grad_());
    const auto ref = at::convolution(of64[0], of64[1], bias ? of64[2] : torch::Tensor(), {stride, stride, stride},
                                     {padding, padding, padding}, {1, 1, 1}, false, {0, 0, 0}, 1);
    QCOMPARE(out.sizes(), ref.sizes());
    QVERIFY(out.grad_fn() && out.grad_fn()->name().find("HaloConv") != std::string::npos);  // the oneDNN path ran
    const auto g = torch::randn_like(out);
    const auto got = torch::autograd::grad({out}, of, {g});
    const auto want = torch::autograd::grad({ref}, of64, {g.to(torch::kDouble)});
    auto check = [](const torch::Tensor& a, const torch::Tensor& b, const QString& what) {
      const double scale = b.abs().max().item<double>();
      const auto c = checks::compare(a, b, 0.0, 1e-5 * scale);
      QVERIFY2(c.within, qPrintable(QString("%1: max abs diff %2 (largest magnitude %3)").arg(what).arg(c.maxAbs).arg(scale)));
    };
    check(out, ref, "output");
    for (std::size_t i = 0; i < got.size(); ++i) check(got[i], want[i], QString("gradient %1").arg(i));
    torch::NoGradGuard noGrad;
    check(conv(x), ref.detach(), "inference output");
  }

  // A slab below LibTorch's size test whose unsharded layer is above it: both run oneDNN, and the
  // sharded results equal the unsharded ones. Base 16 and 32x48x8: enc0's and dec0's 16-channel
  // convolutions on 2 slabs of 16 planes.
  void oneDnnSlabs() {
    checks::ExactFp32Guard exact;
    QVERIFY(shard::callsOneDnn(torch::zeros({1, 16, 18, 48, 8}), torch::zeros({16, 16, 3, 3, 3}), 2));
    torch::manual_seed(5);
    auto holder = model::UNet3d(model::UNet3dOptions().base_channels(16).depth(2).dropout({0.0, 0.0, 0.0}).out_channels(2));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    const auto x = torch::randn({1, 1, 32, 48, 8});
    const auto target = torch::rand({1, 2, 32, 48, 8});
    engine::SplitExecutor plain(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    const Result ref = forwardBackward(plain, *net, x, target);
    engine::SplitExecutor sharded(net, placement::Placement::parse("enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1", net->stageNames(), "cpu"));
    const Result got = forwardBackward(sharded, *net, x, target);
    const auto o = checks::compare(got.out, ref.out, 1e-5, 1e-5);
    QVERIFY2(o.within, qPrintable(QString("output max abs diff %1").arg(o.maxAbs)));
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      const auto c = checks::compare(got.grads[i], ref.grads[i], 1e-5, 1e-5);
      QVERIFY2(c.within, qPrintable(QString("gradient %1 max abs diff %2").arg(i).arg(c.maxAbs)));
    }
  }

  // Kernels wider than 3 along the cut axis take a halo of (k-1)/2 planes, whose edge
  // convolutions read the halo beside halo - 1 planes of zeros (no network in the product has
  // such a layer yet; plugins may). One HaloConv3d, slabs on threads of one group, against the
  // same layer unsharded: output and the gradients of input, weight and bias.
  void wideKernels_data() {
    QTest::addColumn<QList<int>>("kernel");  // D, H, W
    QTest::addColumn<int>("dim");            // cut axis: 2 = D, 3 = H
    QTest::addColumn<QList<int>>("slabs");
    QTest::newRow("5^3, 2 slabs along D") << QList<int>{5, 5, 5} << 2 << QList<int>{6, 7};
    QTest::newRow("5^3, 3 uneven slabs along D") << QList<int>{5, 5, 5} << 2 << QList<int>{2, 5, 3};
    QTest::newRow("7x3x3, 2 slabs along D") << QList<int>{7, 3, 3} << 2 << QList<int>{3, 8};
    QTest::newRow("3x5x3, 3 slabs along H") << QList<int>{3, 5, 3} << 3 << QList<int>{4, 2, 5};
  }
  void wideKernels() {
    QFETCH(QList<int>, kernel);
    QFETCH(int, dim);
    QFETCH(QList<int>, slabs);
    checks::ExactFp32Guard exact;
    torch::manual_seed(11);
    const std::vector<std::int64_t> k(kernel.begin(), kernel.end());
    shard::HaloConv3d conv(torch::nn::Conv3dOptions(3, 4, k).padding({k[0] / 2, k[1] / 2, k[2] / 2}));
    std::vector<std::int64_t> shape{1, 3, 9, 10, 11};
    shape[dim] = std::accumulate(slabs.begin(), slabs.end(), 0);
    const auto x = torch::randn(shape);
    auto refX = x.clone().requires_grad_(true);
    const auto ref = conv->forward(refX);  // outside a shard scope: LibTorch's Conv3d
    const auto target = torch::randn_like(ref);
    (ref * target).mean().backward();  // a mean, as the network rows: gradients of order 1e-3, not sums over every voxel
    const auto refW = conv->weight.grad().clone(), refB = conv->bias.grad().clone();
    conv->zero_grad();

    const std::vector<std::int64_t> sizes(slabs.begin(), slabs.end());
    std::vector<torch::Tensor> xs, outs(sizes.size());
    for (const auto& part : x.split_with_sizes(sizes, dim)) xs.push_back(part.clone().requires_grad_(true));
    engine::ThreadShardGroup group(std::vector<torch::Device>(sizes.size(), torch::kCPU), dim);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i)
      threads.emplace_back([&, i] {
        try {
          shard::ShardScope scope(&group.member(i));
          outs[i] = conv->forward(xs[i]);
        } catch (const std::exception& e) {
          errors[i] = e.what();
          group.abort();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) QVERIFY2(e.empty(), e.c_str());
    const auto got = torch::cat(outs, dim);
    (got * target).mean().backward();

    const auto o = checks::compare(got, ref, 1e-5, 1e-5);
    QVERIFY2(o.within, qPrintable(QString("output max abs diff %1").arg(o.maxAbs)));
    std::vector<torch::Tensor> slabGrads;
    for (const auto& part : xs) slabGrads.push_back(part.grad());
    const auto gx = checks::compare(torch::cat(slabGrads, dim), refX.grad(), 1e-5, 1e-5);
    QVERIFY2(gx.within, qPrintable(QString("input gradient max abs diff %1").arg(gx.maxAbs)));
    const auto gw = checks::compare(conv->weight.grad(), refW, 1e-5, 1e-5);
    QVERIFY2(gw.within, qPrintable(QString("weight gradient max abs diff %1").arg(gw.maxAbs)));
    const auto gb = checks::compare(conv->bias.grad(), refB, 1e-5, 1e-5);
    QVERIFY2(gb.within, qPrintable(QString("bias gradient max abs diff %1").arg(gb.maxAbs)));
  }

  // The halo matters: without it (each slab zero-padded on its own) the output differs.
  void haloIsNeeded() {
    torch::manual_seed(3);
    auto holder = model::UNet3d(tiny(model::Norm::None));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    const auto x = torch::randn({1, 1, 32, 16, 16});
    torch::NoGradGuard noGrad;
    engine::SplitExecutor plain(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    const auto ref = plain.forward(x);
    // The network run on two halves separately: what sharding without halos would compute.
    const auto naive = torch::cat({plain.forward(x.narrow(2, 0, 16)), plain.forward(x.narrow(2, 16, 16))}, 2);
    QVERIFY((naive - ref).abs().max().item<double>() > 1e-3);
    engine::SplitExecutor sharded(net, placement::Placement::parse("enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1", net->stageNames(), "cpu"));
    QVERIFY((sharded.forward(x) - ref).abs().max().item<double>() < 1e-5);
  }

  // bf16 (autocast on each slab's device) runs sharded and stays near the unsharded bf16 run.
  void bf16Works() {
    torch::manual_seed(3);
    auto holder = model::UNet3d(tiny(model::Norm::Instance));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    const auto x = torch::randn({1, 1, 32, 16, 16});
    const auto target = torch::rand({1, 2, 32, 16, 16});
    const auto bf16 = placement::StagePrecisions::parse("bf16");
    engine::SplitExecutor plain(net, placement::Placement::uniform(net->stageNames(), "cpu"), bf16);
    const Result ref = forwardBackward(plain, *net, x, target);
    engine::SplitExecutor sharded(net, placement::Placement::parse("enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1", net->stageNames(), "cpu"),
                                  bf16, {"enc0", "dec0"});
    std::map<std::string, torch::ScalarType> dtypes;
    sharded.setOutputObserver([&](const std::string& stage, const torch::Tensor& out) { dtypes[stage] = out.scalar_type(); });
    const Result got = forwardBackward(sharded, *net, x, target);
    QCOMPARE(dtypes.at("enc0"), torch::kBFloat16);  // autocast reached the slab threads
    QCOMPARE(dtypes.at("dec0"), torch::kBFloat16);
    const Result fp32 = [&] {
      engine::SplitExecutor full(net, placement::Placement::uniform(net->stageNames(), "cpu"));
      return forwardBackward(full, *net, x, target);
    }();
    QVERIFY2((fp32.out - ref.out).abs().max().item<double>() > 1e-4, "the bf16 run computed in fp32");
    const double diff = (got.out - ref.out).abs().max().item<double>();
    qInfo("bf16 sharded vs unsharded output max abs diff %.3g", diff);
    QVERIFY2(diff < 5e-2, qPrintable(QString("bf16 output differs by %1").arg(diff)));
    for (std::size_t i = 0; i < ref.grads.size(); ++i) QVERIFY(torch::isfinite(got.grads[i]).all().item<bool>());
  }

  // 20 training steps with stages sharded equal 20 unsharded steps. With instance norm, the bias
  // of a convolution that feeds a normalisation has a true gradient of zero (the norm subtracts
  // it again): both runs' gradients there are rounding noise (~1e-9) that Adam scales up to full
  // steps, so those biases are left out of the comparison in that row. The same amplification
  // reaches the other weights through the norms' rounding: measured 1.1e-4 after 20 steps (one
  // step's gradients agree within 1e-7, see equivalence), so that row allows 1e-3, not 1e-5.
  void trainingEqualsUnsharded_data() {
    QTest::addColumn<QString>("norm");
    QTest::addColumn<QString>("placement");
    QTest::addColumn<double>("tolerance");
    QTest::newRow("no norm, full-resolution stages + head") << "none" << "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1,head=cuda:0+cuda:1" << 1e-5;
    QTest::newRow("no norm, every stage, 3 shards") << "none" << "*cuda:0+cuda:1+cuda:2" << 1e-5;
    QTest::newRow("instance norm, full-resolution stages") << "instance" << "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1" << 1e-3;
  }
  void trainingEqualsUnsharded() {
    QFETCH(QString, norm);
    QFETCH(QString, placement);
    QFETCH(double, tolerance);
    checks::ExactFp32Guard exact;
    const auto n = model::normFromString(norm.toStdString());
    auto train = [&](const std::string& text) {
      torch::manual_seed(5);
      auto holder = model::UNet3d(tiny(n));
      std::shared_ptr<model::StagedNetwork> net = holder.ptr();
      run::RunSpec spec;
      spec.steps = 20;
      spec.patch = {24, 24, 24};
      spec.seed = 9;
      spec.learningRate = 3e-3;
      const std::string p = !text.empty() && text[0] == '*' ? allStages(text.substr(1), net->stageNames()) : text;
      spec.setPlacement(placement::Placement::parse(p, net->stageNames(), "cpu"));
      engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(), spec);
      trainer.run(nullptr);
      std::map<std::string, torch::Tensor> weights;
      for (const auto& p : net->root().named_parameters()) weights[p.key()] = p.value().detach().clone();
      return weights;
    };
    const auto ref = train("");
    const auto got = train(placement.toStdString());
    torch::manual_seed(5);
    auto start = model::UNet3d(tiny(n));
    double worst = 0, moved = 0;
    int compared = 0;
    for (const auto& p : start->named_parameters()) {
      const std::string& name = p.key();
      const bool feedsNorm = n != model::Norm::None && (name.find("convs.0.bias") != std::string::npos ||
                                                        name.find("convs.3.bias") != std::string::npos);
      if (feedsNorm) continue;
      ++compared;
      worst = std::max(worst, (got.at(name) - ref.at(name)).abs().max().item<double>());
      moved = std::max(moved, (ref.at(name) - p.value()).abs().max().item<double>());
    }
    qInfo("after 20 steps: %d weight tensors, max abs diff %.3g (training moved weights by up to %.3g)", compared, worst, moved);
    QVERIFY(compared > 20);
    QVERIFY2(moved > 1e-3, "training did not change the weights");
    QVERIFY2(worst <= tolerance, qPrintable(QString("sharded training differs by %1").arg(worst)));
  }

  // Whole-volume inference (no sliding window, so no seams) of an odd-sized volume with the
  // full-resolution stages sharded over three devices: the same probabilities as unsharded.
  void wholeVolumeInference() {
    checks::ExactFp32Guard exact;
    torch::manual_seed(3);
    auto holder = model::UNet3d(tiny(model::Norm::Instance));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    net->root().eval();
    const auto image = torch::randn({1, 53, 37, 29});  // not multiples of 8: the inferer pads
    engine::InferOptions o;  // window 0: the whole volume in one pass
    engine::SplitExecutor plain(net, placement::Placement::uniform(net->stageNames(), "cpu"));
    engine::Inferer a(plain);
    const auto ref = a.predict(image, o);
    engine::SplitExecutor sharded(
        net, placement::Placement::parse("enc0=cuda:0+cuda:1+cuda:2,dec0=cuda:0+cuda:1+cuda:2,head=cuda:0+cuda:1+cuda:2",
                                         net->stageNames(), "cpu"));
    int slabsSeen = 0;
    sharded.setOutputObserver([&](const std::string& stage, const torch::Tensor& out) {
      if (stage == "enc0" && out.size(2) < 56) ++slabsSeen;
    });
    engine::Inferer b(sharded);
    const auto got = b.predict(image, o);
    QCOMPARE(slabsSeen, 1);  // one pass, cut into slabs
    const double diff = (got.probabilities - ref.probabilities).abs().max().item<double>();
    qInfo("whole-volume probabilities, sharded vs not: max abs diff %.3g", diff);
    QVERIFY(diff < 1e-5);
    QVERIFY(torch::equal(got.labels, ref.labels));
  }

  // The GPU kit's shard check, rehearsed with cuda:0 standing in on the CPU: the code the next GPU
  // lease runs (slabs on cpu and cuda:0) is exercised here, so it cannot arrive broken.
  void gpuKitShardCheckRehearsed() {
    const auto r = checks::shardEquivalence("cuda:0", 32);
    QVERIFY2(r.ok(), r.detail.c_str());
    QVERIFY(r.status == checks::CheckResult::Status::Pass);
    QCOMPARE(int(r.figures.size()), 2);
    QCOMPARE(checks::shardEquivalence("cpu", 32).status, checks::CheckResult::Status::Skip);
  }

  void badRequests_data() {
    QTest::addColumn<QString>("placement");
    QTest::addColumn<QList<int>>("slabs");
    QTest::addColumn<int>("depth");  // volume planes along the axis
    QTest::addColumn<QString>("expected");
    QTest::newRow("slab thinner than the halo") << "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1" << QList<int>{0, 32} << 32 << "thinner than the halo";
    QTest::newRow("boundary off the pooling factor") << "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1" << QList<int>{15, 17} << 32 << "not on a multiple of 2";
    QTest::newRow("sizes do not add up") << "enc0=cuda:0+cuda:1,dec0=cuda:0+cuda:1" << QList<int>{16, 8} << 32 << "hold 24 planes";
    QTest::newRow("too many slabs for the volume") << "*cuda:0+cuda:1+cuda:2" << QList<int>{} << 16 << "cannot be cut into 3 slabs";
    QTest::newRow("one device listed twice") << "enc0=cuda:0+cuda:0" << QList<int>{} << 32 << "listed twice";
    QTest::newRow("mixed ranks and local devices") << "enc0=cuda:0+r1:cpu" << QList<int>{} << 32 << "mixes this process";
  }
  void badRequests() {
    QFETCH(QString, placement);
    QFETCH(QList<int>, slabs);
    QFETCH(int, depth);
    QFETCH(QString, expected);
    torch::manual_seed(3);
    auto holder = model::UNet3d(tiny(model::Norm::None));
    std::shared_ptr<model::StagedNetwork> net = holder.ptr();
    const auto stages = net->stageNames();
    std::string message;
    try {
      const std::string text = placement.startsWith('*') ? allStages(placement.mid(1).toStdString(), stages)
                                                         : placement.toStdString();
      auto plan = placement::Placement::parse(text, stages, "cpu");
      engine::SplitExecutor exec(net, plan);
      std::map<std::string, std::vector<std::int64_t>> sizes;
      if (!slabs.isEmpty()) sizes[plan.entryOf("enc0")] = std::vector<std::int64_t>(slabs.begin(), slabs.end());
      exec.setSharding(placement::ShardAxis::Depth, sizes);
      torch::NoGradGuard noGrad;
      exec.forward(torch::randn({1, 1, depth, 16, 16}));
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    QVERIFY2(!message.empty(), "the bad request was accepted");
    QVERIFY2(message.find(expected.toStdString()) != std::string::npos, message.c_str());
    QVERIFY2(message.find('\n') == std::string::npos, "the refusal is more than one line");
  }
};

QTEST_GUILESS_MAIN(ShardingTest)
#include "ShardingTest.moc"
