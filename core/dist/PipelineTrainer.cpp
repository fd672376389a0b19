#include "core/dist/PipelineTrainer.h"
#include "core/dist/RankFigures.h"
#include "core/dist/RunLoop.h"
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/Devices.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/StageCheckpoint.h"
#include "core/engine/StepSafety.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"
#include "core/shard/HaloConv3d.h"
#include "core/dist/PipelineInferer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <map>
#include <numeric>

namespace splitseg::dist {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string microName(const std::string& what, int m) { return what + " of micro-batch " + std::to_string(m); }
} // namespace

std::vector<int> stageOwners(const placement::Placement& placement, int worldSize) {
  std::vector<int> owners;
  std::vector<bool> used(static_cast<std::size_t>(worldSize), false);
  for (const auto& s : placement.stages()) {
    // The slabs' transport over ranks exists (RankShardComm, ShardRanksTest); the pipeline that
    // would scatter, gather and all-reduce the replicas' gradients around it does not yet.
    if (placement.isSharded(s))
      throw InvalidArgument("placement." + s + ": a stage sharded over ranks (" + placement.entryOf(s) +
                            ") works only in training with every stage sharded over every rank; shard it over this "
                            "process's devices (cuda:0+cuda:1), place it on one rank, or shard every stage");
    const int r = placement.rankOf(s);
    if (r >= worldSize)
      throw InvalidArgument("placement." + s + ": rank " + std::to_string(r) + " does not exist (WORLD_SIZE=" +
                            std::to_string(worldSize) + ", ranks 0.." + std::to_string(worldSize - 1) + ")");
    used[static_cast<std::size_t>(r)] = true;
    owners.push_back(r);
  }
  for (int r = 0; r < worldSize; ++r)
    if (!used[static_cast<std::size_t>(r)])
      throw InvalidArgument("placement: rank " + std::to_string(r) + " has no stage (WORLD_SIZE=" +
                            std::to_string(worldSize) + "); place a stage on r" + std::to_string(r) + ":<device>");
  return owners;
}

std::vector<torch::Device> stageDevices(const placement::Placement& placement) {
  std::vector<torch::Device> devices;
  for (const auto& s : placement.stages()) devices.emplace_back(placement::splitRank(placement.deviceOf(s)).device);
  return devices;
}

PipelineTrainer::PipelineTrainer(Comm& comm, std::shared_ptr<model::StagedNetwork> network,
                                 std::shared_ptr<data::SampleSource> source, run::RunSpec run)
    : comm_(comm), network_(std::move(network)), source_(std::move(source)), spec_(std::move(run)),
      placement_(spec_.resolvePlacement(network_->stageNames(), "cpu")),
      schedule_(network_->stageSpecs(), stageOwners(placement_, comm.size()), spec_.microBatches),
      forwardSchedule_(network_->stageSpecs(), stageOwners(placement_, comm.size()), 1),
      batches_(source_, spec_, network_->outChannels()) {
  if (comm_.rank() == 0 && !source_) throw InvalidArgument("rank 0 needs the training data");
  devices_ = stageDevices(placement_);
  // This rank's stages move to its devices; the rest of its copy of the network stays on the CPU
  // (rank 0 gathers checkpoints into it).
  moveOwnedToDevices();
  std::vector<torch::Tensor> params;
  std::vector<std::string> devices;
  for (int i : schedule_.stagesOf(comm_.rank())) {
    for (auto& p : network_->stageModule(i)->parameters()) params.push_back(p);
    const std::string d = devices_[static_cast<std::size_t>(i)].str();
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  optimizer_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(spec_.learningRate));
  engine::allocateAdamState(*optimizer_);
  meter_ = std::make_unique<engine::MemoryMeter>(devices);
  // The run's CPU budget holds on every rank, as the Trainer keeps to it in one process.
  engine::applyCpuBudget(meter_->cpu(), spec_.cpuBudgetBytes, *optimizer_);
  // One set of initial weights for all: rank 0's. LibTorch's generator restarts from the seed
  // after the network is built, as the Trainer's does (checkpoints store it).
  scatter(false, nullptr);
  torch::manual_seed(spec_.seed);
}

PipelineTrainer::~PipelineTrainer() = default;

torch::Device PipelineTrainer::deviceOf(int stage) const { return devices_.at(static_cast<std::size_t>(stage)); }

std::string PipelineTrainer::laneOf(int stage) const {
  const auto& name = schedule_.spec(stage).name;
  return "r" + std::to_string(placement_.rankOf(name)) + ":" + placement::splitRank(placement_.deviceOf(name)).device;
}

void PipelineTrainer::moveOwnedToDevices() {
  for (int i : schedule_.stagesOf(comm_.rank())) network_->stageModule(i)->to(deviceOf(i));
}

engine::StepMetrics PipelineTrainer::step() {
  const auto t0 = Clock::now();
  comm_.counters() = {};
  engine::CpuMemoryScope scope(meter_->cpu());
  meter_->cpu().clearExceeded();
  // Micro-batches run the convolution kernels of their whole batch, forward and backward.
  shard::WholeBatchScope whole(spec_.batch);
  meter_->resetPeaks();
  network_->root().train();
  working_ = "batch";
  const int me = comm_.rank();
  const int S = schedule_.stageCount(), M = schedule_.microBatches();
  const auto micro = [M](const char* phase, int m) {
    return std::string(" (") + phase + (M > 1 ? ", micro-batch " + std::to_string(m + 1) + " of " + std::to_string(M) : "") + ")";
  };
  const int head = schedule_.headStage();
  const auto sizes = placement::PipelineOrder::microSizes(spec_.batch, M);
  double compute = 0;
  engine::TimelineRecorder* rec = spec_.timeline ? &timeline_ : nullptr;
  if (rec) rec->begin();
  const std::string myLane = laneOf(schedule_.stagesOf(me).front());
  // A span ends when its device has finished (CUDA runs asynchronously).
  auto spanEnd = [&](const torch::Device& d) {
    if (d.is_cuda()) torch::cuda::synchronize(d.index());
    return rec->now();
  };

  // Rank 0 draws the batch as the Trainer does and sends each reader its micro-batches.
  std::vector<torch::Tensor> inputs(M), targets(M);
  if (me == 0) {
    torch::Tensor input, target;
    batches_.next(input, target);  // labels checked
    if (rec) rec->add(myLane, "batch", engine::SpanKind::Wait, 0.0, rec->now());
    const std::vector<std::int64_t> split(sizes.begin(), sizes.end());
    auto ins = input.split_with_sizes(split), tgs = target.split_with_sizes(split);
    for (int m = 0; m < M; ++m) {
      inputs[m] = ins[m].contiguous();
      targets[m] = tgs[m].contiguous();
      for (int r : schedule_.inputReaders())
        comm_.send(inputs[m], r, PipelineSchedule::tag(Message::Input, 0, m), microName("the input", m));
      if (schedule_.owner(head) != 0)
        comm_.send(targets[m], schedule_.owner(head), PipelineSchedule::tag(Message::Target, 0, m),
                   microName("the labels", m));
    }
  }
  optimizer_->zero_grad(true);

  auto at = [M](int stage, int m) { return static_cast<std::size_t>(stage * M + m); };
  std::vector<torch::Tensor> outputs(static_cast<std::size_t>(S * M)), gradients(outputs.size());
  std::vector<std::vector<torch::Tensor>> leaves(outputs.size());
  std::map<std::pair<int, int>, torch::Tensor> received, outgoing;
  std::map<std::pair<int, int>, int> readsLeft, fetchesLeft;
  std::vector<torch::Tensor> losses(M), labels(M), headTargets(M);
  double lossValue = 0;

  auto fetch = [&](const std::string& name, int m) -> torch::Tensor {
    const int p = schedule_.producer(name);
    if (p < 0 && me == 0) return inputs[m];
    if (p >= 0 && schedule_.owner(p) == me) return outputs[at(p, m)];
    auto& slot = received[{p, m}];
    if (!slot.defined()) {
      const double start = rec ? rec->now() : 0.0;
      slot = p < 0 ? comm_.recv(0, PipelineSchedule::tag(Message::Input, 0, m), microName("the input", m))
                   : comm_.recv(schedule_.owner(p), PipelineSchedule::tag(Message::Activation, p, m),
                                microName(schedule_.spec(p).name + "'s output", m));
      if (rec) rec->add(myLane, p < 0 ? "input" : schedule_.spec(p).name, engine::SpanKind::Wait, start, rec->now(), m);
    }
    torch::Tensor t = slot;
    // Let go of a received activation once its last reader here has it: the readers' graphs
    // keep it as long as backward needs it, and no longer (the planner counts it that way).
    if (p >= 0) {
      auto left = fetchesLeft.try_emplace({p, m}, schedule_.readsOn(p, me)).first;
      if (--left->second <= 0) received.erase({p, m});
    }
    return t;
  };

  // Forward, on the wavefront order.
  for (const Cell& c : schedule_.forwardOrder(me)) {
    const auto& spec = schedule_.spec(c.stage);
    working_ = spec.name + micro("forward", c.micro);
    const torch::Device device = deviceOf(c.stage);
    const bool bf16 = spec_.precision.of(spec.name) == placement::Precision::BF16;
    std::vector<torch::Tensor> in;
    for (const auto& name : spec.inputs) {
      torch::Tensor t = fetch(name, c.micro).to(device);
      if (!bf16 && t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat);
      // Each stage's inputs are leaves of its own graph: backward runs stage by stage, and the
      // gradient of each input goes to its producer (here or on another rank).
      t = t.detach();
      if (schedule_.producer(name) >= 0 && t.is_floating_point()) t.requires_grad_(true);
      in.push_back(t);
    }
    const auto tc = Clock::now();
    const double forwardStart = rec ? rec->now() : 0.0;
    torch::Tensor out;
    {
      engine::AutocastScope autocast(bf16, device.type());
      if (spec_.recompute.count(spec.name)) {
        auto fn = [this, c, rec, &spanEnd](const std::vector<torch::Tensor>& x) {
          // Called again with grad on during backward: that call is the recompute.
          if (!rec || !torch::GradMode::is_enabled()) return network_->runStage(c.stage, x);
          const double start = rec->now();
          auto y = network_->runStage(c.stage, x);
          rec->add(laneOf(c.stage), schedule_.spec(c.stage).name, engine::SpanKind::Recompute, start,
                  spanEnd(deviceOf(c.stage)), c.micro);
          return y;
        };
        out = engine::runCheckpointed(fn, in, network_->stageModule(c.stage)->parameters());
      } else {
        out = network_->runStage(c.stage, in);
      }
    }
    compute += since(tc);
    if (rec) rec->add(laneOf(c.stage), spec.name, engine::SpanKind::Forward, forwardStart, spanEnd(device), c.micro);
    leaves[at(c.stage, c.micro)] = std::move(in);
    if (c.stage == head) {
      torch::Tensor target = me == 0 ? targets[c.micro]
                                     : comm_.recv(0, PipelineSchedule::tag(Message::Target, 0, c.micro),
                                                  microName("the labels", c.micro));
      working_ = "loss" + micro("forward", c.micro);
      const auto tl = Clock::now();
      const double lossStart = rec ? rec->now() : 0.0;
      target = target.to(out.device());
      auto r = engine::segmentationLoss(out, target);
      const double share = static_cast<double>(sizes[c.micro]) / spec_.batch;
      const double value = r.loss.item<double>();
      if (!std::isfinite(value))
        throw engine::NonFiniteLoss("rank " + std::to_string(me) + ": step " + std::to_string(step_ + 1) +
                                    ": the loss of micro-batch " + std::to_string(c.micro) + " is " +
                                    std::to_string(value) + "; the step was not applied");
      losses[c.micro] = r.loss * share;
      lossValue += value * share;
      labels[c.micro] = engine::labelsFromLogits(out.detach().to(torch::kFloat)).cpu();
      headTargets[c.micro] = target.cpu();
      compute += since(tl);
      if (rec) rec->add(laneOf(c.stage), "loss", engine::SpanKind::Forward, lossStart, rec->now(), c.micro);
    }
    outputs[at(c.stage, c.micro)] = out;
    for (int r : schedule_.remoteReaders(c.stage))
      comm_.send(out, r, PipelineSchedule::tag(Message::Activation, c.stage, c.micro),
                 microName(spec.name + "'s output", c.micro));
  }

  // Backward, on the reverse wavefront.
  for (const Cell& c : schedule_.backwardOrder(me)) {
    const auto& spec = schedule_.spec(c.stage);
    working_ = spec.name + micro("backward", c.micro);
    auto& out = outputs[at(c.stage, c.micro)];
    torch::Tensor grad = gradients[at(c.stage, c.micro)];
    const double waitStart = rec ? rec->now() : 0.0;
    if (c.stage != head) {
      for (int r : schedule_.remoteReaders(c.stage)) {
        auto g = comm_.recv(r, PipelineSchedule::tag(Message::Gradient, c.stage, c.micro),
                            microName("the gradient of " + spec.name + "'s output", c.micro))
                     .to(out.device());
        grad = grad.defined() ? grad + g : g;
      }
    }
    if (rec && c.stage != head && !schedule_.remoteReaders(c.stage).empty())
      rec->add(myLane, spec.name, engine::SpanKind::Wait, waitStart, rec->now(), c.micro);
    const auto tc = Clock::now();
    const double backwardStart = rec ? rec->now() : 0.0;
    if (c.stage == head) {
      torch::autograd::backward({losses[c.micro]});
      // The loss's graph reaches the head's input leaves, which hold the head's input and its
      // gradient: kept to the step's end, M micro-batches held 2 tensors each (RankMemoryTest).
      losses[c.micro] = torch::Tensor();
    } else if (grad.defined() && out.requires_grad()) {
      // Entered by the output's edge, as autograd::backward would, after letting the output go: its
      // storage then lives only as long as the graph saves it, and a checkpointed stage's output
      // (computed without a graph) is freed before the recompute (RankMemoryTest: the decoders'
      // rank 4 MiB lower at M=1, one output map; the planner's StepSimulator does the same).
      const auto root = torch::autograd::impl::gradient_edge(out);
      const torch::Tensor g = grad.to(out.scalar_type());
      out = torch::Tensor();
      torch::autograd::Engine::get_default_engine().execute({root}, {g}, /*keep_graph=*/false,
                                                            /*create_graph=*/false, /*accumulate_grad=*/true, {});
    }
    auto& in = leaves[at(c.stage, c.micro)];
    for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
      const int p = schedule_.producer(spec.inputs[k]);
      if (p < 0) continue;
      torch::Tensor g = in[k].grad();
      if (!g.defined()) g = torch::zeros_like(in[k]);
      if (schedule_.owner(p) == me) {
        auto& acc = gradients[at(p, c.micro)];
        g = g.to(outputs[at(p, c.micro)].device());
        acc = acc.defined() ? acc + g : g;
        continue;
      }
      const std::pair<int, int> key{p, c.micro};
      auto& acc = outgoing[key];
      acc = acc.defined() ? acc + g : g.detach();
      auto left = readsLeft.find(key);
      if (left == readsLeft.end()) left = readsLeft.emplace(key, schedule_.readsOn(p, me)).first;
      if (--left->second == 0) {
        comm_.send(acc, schedule_.owner(p), PipelineSchedule::tag(Message::Gradient, p, c.micro),
                   microName("the gradient of " + schedule_.spec(p).name + "'s output", c.micro));
        outgoing.erase(key);
      }
    }
    compute += since(tc);
    if (rec)
      rec->add(laneOf(c.stage), spec.name, engine::SpanKind::Backward, backwardStart, spanEnd(deviceOf(c.stage)), c.micro);
    // This cell's activations are no longer needed.
    out = torch::Tensor();
    in.clear();
    gradients[at(c.stage, c.micro)] = torch::Tensor();
  }
  const auto to = Clock::now();
  const double optimizerStart = rec ? rec->now() : 0.0;
  const double lr = spec_.learningRateAt(step_);
  engine::setLearningRate(*optimizer_, lr);
  working_ = "optimizer";
  engine::adamStep(*optimizer_);
  compute += since(to);
  if (rec) {
    std::vector<std::string> lanes;
    for (int i : schedule_.stagesOf(me))
      if (std::find(lanes.begin(), lanes.end(), laneOf(i)) == lanes.end()) lanes.push_back(laneOf(i));
    const double end = spanEnd(deviceOf(schedule_.stagesOf(me).front()));
    for (const auto& lane : lanes) rec->add(lane, "", engine::SpanKind::Optimizer, optimizerStart, end);
  }
  // Rank 0 draws the next batch while its GPU may still run this step's kernels (pinned memory), as
  // the Trainer does; on the CPU nothing would overlap.
  if (me == 0 && deviceOf(schedule_.stagesOf(0).front()).is_cuda() && engine::anotherStepFollows(spec_, step_ + 1))
    batches_.drawAhead(/*pinned=*/true);
  ++step_;

  // The head's rank knows loss and Dice (over the whole batch, as one process computes them).
  std::vector<double> result;
  if (me == schedule_.owner(head)) {
    const auto classes = network_->outChannels();
    result.push_back(lossValue);
    for (double d : engine::dicePerClass(torch::cat(labels), torch::cat(headTargets),
                                         classes == 1 ? 1 : static_cast<int>(classes - 1)))
      result.push_back(d);
  }
  engine::checkCpuBudget(meter_->cpu(), "r" + std::to_string(me) + ":cpu", "a training step");
  auto memory = meter_->read();
  std::int64_t peak = 0;
  for (const auto& d : memory) peak = std::max(peak, d.peak);
  const double wall = since(t0);
  const auto& cnt = comm_.counters();
  engine::RankStepStats mine{me, devices_[static_cast<std::size_t>(schedule_.stagesOf(me).front())].str(), compute,
                             cnt.waitSeconds, std::max(0.0, wall - compute - cnt.waitSeconds), cnt.bytesSent,
                             cnt.bytesReceived, peak};
  engine::StepMetrics m;
  if (me != 0) {
    if (me == schedule_.owner(head))
      comm_.send(torch::tensor(result, torch::kDouble), 0, PipelineSchedule::tag(Message::Result, 0, 0), "the loss");
    std::vector<double> figures = rankFigures(mine);
    if (rec) encodeSpans(rec->take(), figures);
    comm_.send(torch::tensor(figures, torch::kDouble), 0, PipelineSchedule::tag(Message::Stats, 0, 0), "the step's figures");
    comm_.flush();
    m.step = step_;
    return m;
  }
  if (schedule_.owner(head) != 0) {
    auto r = comm_.recv(schedule_.owner(head), PipelineSchedule::tag(Message::Result, 0, 0), "the loss");
    result.assign(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
  }
  m.ranks.push_back(mine);
  if (rec) m.timeline = rec->take();
  for (int r = 1; r < comm_.size(); ++r) {
    auto s = comm_.recv(r, PipelineSchedule::tag(Message::Stats, 0, 0), "the step's figures");
    const double* v = s.data_ptr<double>();
    const std::vector<double> all(v, v + s.numel());
    m.ranks.push_back(rankStatsFrom(r, all));
    decodeSpans(std::vector<double>(all.begin() + kRankFigures, all.end()), m.timeline);
  }
  comm_.flush();
  for (auto& rs : m.ranks)
    if (rs.device.empty())
      rs.device = devices_[static_cast<std::size_t>(schedule_.stagesOf(rs.rank).front())].str();
  m.step = step_;
  m.totalSteps = spec_.totalSteps();
  m.epoch = spec_.epochs > 0 ? static_cast<int>((step_ - 1) / spec_.stepsPerEpoch) + 1 : 1;
  m.learningRate = lr;
  m.loss = result.empty() ? 0.0 : result.front();
  if (result.size() > 1) m.dice.assign(result.begin() + 1, result.end());
  m.meanDice = m.dice.empty() ? 0.0 : std::accumulate(m.dice.begin(), m.dice.end(), 0.0) / double(m.dice.size());
  m.seconds = since(t0);
  m.memory = memory;
  m.hostRss = engine::processRssBytes();
  return m;
}

// A span travels as 6 numbers: the stage whose lane it is on, what it names (a stage index, or
// one of the names below), kind, micro-batch, start, end.
namespace {
const std::vector<std::string> kSpanNames{"", "loss", "input", "batch"};
constexpr std::size_t kSpanNumbers = 6;
} // namespace

void PipelineTrainer::encodeSpans(const std::vector<engine::TimelineSpan>& spans, std::vector<double>& out) const {
  const auto mine = schedule_.stagesOf(comm_.rank());
  const int S = schedule_.stageCount();
  for (const auto& sp : spans) {
    int laneStage = mine.front();
    for (int i : mine)
      if (laneOf(i) == sp.lane) laneStage = i;
    int what = -1;
    for (int i = 0; i < S && what < 0; ++i)
      if (schedule_.spec(i).name == sp.stage) what = i;
    for (std::size_t k = 0; k < kSpanNames.size() && what < 0; ++k)
      if (kSpanNames[k] == sp.stage) what = S + static_cast<int>(k);
    if (what < 0) what = S;  // unnamed
    out.insert(out.end(), {double(laneStage), double(what), double(static_cast<int>(sp.kind)), double(sp.micro), sp.start, sp.end});
  }
}

void PipelineTrainer::decodeSpans(const std::vector<double>& in, std::vector<engine::TimelineSpan>& out) const {
  const int S = schedule_.stageCount();
  const int names = static_cast<int>(kSpanNames.size());
  for (std::size_t k = 0; k + kSpanNumbers <= in.size(); k += kSpanNumbers) {
    const double* v = in.data() + k;
    const int laneStage = static_cast<int>(v[0]), what = static_cast<int>(v[1]), kind = static_cast<int>(v[2]);
    // Values another rank of this same build sent; anything else is dropped rather than trusted.
    if (laneStage < 0 || laneStage >= S || what < 0 || what >= S + names || kind < 0 ||
        kind > static_cast<int>(engine::SpanKind::Optimizer) || !std::isfinite(v[4]) || !std::isfinite(v[5]))
      continue;
    out.push_back({laneOf(laneStage), what < S ? schedule_.spec(what).name : kSpanNames[static_cast<std::size_t>(what - S)],
                   static_cast<engine::SpanKind>(kind), static_cast<int>(v[3]), v[4], v[5]});
  }
}

engine::ValidationMetrics PipelineTrainer::validate() {
  working_ = "validation";
  torch::NoGradGuard noGrad;
  engine::EvalModeGuard eval(network_->root());
  engine::ValidationMetrics v;
  v.step = step_;
  if (comm_.rank() != 0) {
    while (comm_.recv(0, controlTag(), "rank 0's next validation sample").item<std::int64_t>() == 1)
      forwardOverRanks(comm_, *network_, forwardSchedule_, devices_, spec_.precision, torch::Tensor());
    return v;
  }
  const auto samples = batches_.validationSamples();
  std::vector<std::vector<double>> dices;
  for (const auto& s : samples) {
    for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::ones({1}, torch::kLong), r, controlTag(), "a command");
    auto input = engine::toTensor(s.channels).unsqueeze(0);
    auto target = engine::toTensor(s.label).round().to(torch::kLong).unsqueeze(0);
    auto logits = forwardOverRanks(comm_, *network_, forwardSchedule_, devices_, spec_.precision, input);
    auto r = engine::segmentationLoss(logits, target.to(logits.device()));
    v.loss += r.loss.item<double>() / static_cast<double>(samples.size());
    dices.push_back(r.dice);
  }
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::zeros({1}, torch::kLong), r, controlTag(), "a command");
  comm_.flush();
  v.cases = static_cast<int>(samples.size());
  averageDice(v, dices);
  return v;
}

void PipelineTrainer::run(engine::MetricsSink* sink, CancelToken* cancel) { runOverRanks(*this, comm_, spec_, sink, cancel); }

} // namespace splitseg::dist
