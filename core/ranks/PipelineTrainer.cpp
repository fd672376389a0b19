#include "core/ranks/PipelineTrainer.h"
#include "core/ranks/RankFigures.h"
#include "core/ranks/RankTrainingMode.h"
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/Devices.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/Recompute.h"
#include "core/engine/OptimizerStep.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"
#include "core/shard/HaloConv3d.h"
#include "core/ranks/PipelineInferer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <map>
#include <numeric>

namespace splitseg::ranks {

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
    : RankTrainingMode(comm), network_(std::move(network)), source_(std::move(source)), spec_(std::move(run)),
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

// One step's tensors and figures on this rank, between the phases of PipelineTrainer::step.
struct PipelineTrainer::StepState {
  int me = 0, M = 1, head = 0;
  std::vector<std::int64_t> sizes;  // micro-batch sizes
  engine::TimelineRecorder* rec = nullptr;
  std::string myLane;
  double compute = 0;
  std::vector<torch::Tensor> inputs, targets;  // rank 0: the micro-batches
  std::vector<torch::Tensor> outputs, gradients;  // per (stage, micro-batch)
  std::vector<std::vector<torch::Tensor>> leaves;
  std::map<std::pair<int, int>, torch::Tensor> received, outgoing;
  std::map<std::pair<int, int>, int> readsLeft, fetchesLeft;
  std::vector<torch::Tensor> losses, labels, headTargets;
  double lossValue = 0;
  double nonFinite = 0;  // the first non-finite micro-batch loss on the head's rank
  int nonFiniteMicro = -1;
  std::size_t at(int stage, int m) const { return static_cast<std::size_t>(stage * M + m); }
};

namespace {
std::string microPhase(const char* phase, int m, int M) {
  return std::string(" (") + phase + (M > 1 ? ", micro-batch " + std::to_string(m + 1) + " of " + std::to_string(M) : "") + ")";
}
} // namespace

double PipelineTrainer::spanEnd(const torch::Device& d) {
  // A span ends when its device has finished (CUDA runs asynchronously).
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
  return timeline_.now();
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
  StepState st;
  st.me = comm_.rank();
  st.M = schedule_.microBatches();
  st.head = schedule_.headStage();
  const auto sizes = placement::PipelineOrder::microSizes(spec_.batch, st.M);
  st.sizes.assign(sizes.begin(), sizes.end());
  st.rec = spec_.timeline ? &timeline_ : nullptr;
  if (st.rec) st.rec->begin();
  st.myLane = laneOf(schedule_.stagesOf(st.me).front());
  const std::size_t cells = static_cast<std::size_t>(schedule_.stageCount() * st.M);
  st.outputs.resize(cells);
  st.gradients.resize(cells);
  st.leaves.resize(cells);
  st.losses.resize(static_cast<std::size_t>(st.M));
  st.labels.resize(static_cast<std::size_t>(st.M));
  st.headTargets.resize(static_cast<std::size_t>(st.M));

  sendBatch(st);
  optimizer_->zero_grad(true);
  for (const Cell& c : schedule_.forwardOrder(st.me)) forwardCell(st, c);  // on the wavefront order
  for (const Cell& c : schedule_.backwardOrder(st.me)) backwardCell(st, c);  // on the reverse wavefront
  working_ = "the step's loss";
  try {
    agreeLossIsFinite(comm_, schedule_.owner(st.head), step_ + 1, st.nonFinite, st.nonFiniteMicro);
  } catch (const engine::NonFiniteLoss&) {
    optimizer_->zero_grad(true);
    throw;
  }
  const double lr = optimizerStep(st);
  return report(st, lr, t0);
}

void PipelineTrainer::sendBatch(StepState& st) {
  // Rank 0 draws the batch as the Trainer does and sends each reader its micro-batches.
  st.inputs.resize(static_cast<std::size_t>(st.M));
  st.targets.resize(static_cast<std::size_t>(st.M));
  if (st.me != 0) return;
  torch::Tensor input, target;
  batches_.next(input, target);  // labels checked
  if (st.rec) st.rec->add(st.myLane, "batch", engine::SpanKind::Wait, 0.0, st.rec->now());
  auto ins = input.split_with_sizes(st.sizes), tgs = target.split_with_sizes(st.sizes);
  for (int m = 0; m < st.M; ++m) {
    st.inputs[m] = ins[m].contiguous();
    st.targets[m] = tgs[m].contiguous();
    for (int r : schedule_.inputReaders())
      comm_.send(st.inputs[m], r, PipelineSchedule::tag(Message::Input, 0, m), microName("the input", m));
    if (schedule_.owner(st.head) != 0)
      comm_.send(st.targets[m], schedule_.owner(st.head), PipelineSchedule::tag(Message::Target, 0, m),
                 microName("the labels", m));
  }
}

torch::Tensor PipelineTrainer::fetch(StepState& st, const std::string& name, int m) {
  const int p = schedule_.producer(name);
  if (p < 0 && st.me == 0) return st.inputs[m];
  if (p >= 0 && schedule_.owner(p) == st.me) return st.outputs[st.at(p, m)];
  auto& slot = st.received[{p, m}];
  if (!slot.defined()) {
    const double start = st.rec ? st.rec->now() : 0.0;
    slot = p < 0 ? comm_.recv(0, PipelineSchedule::tag(Message::Input, 0, m), microName("the input", m))
                 : comm_.recv(schedule_.owner(p), PipelineSchedule::tag(Message::Activation, p, m),
                              microName(schedule_.spec(p).name + "'s output", m));
    if (st.rec) st.rec->add(st.myLane, p < 0 ? "input" : schedule_.spec(p).name, engine::SpanKind::Wait, start, st.rec->now(), m);
  }
  torch::Tensor t = slot;
  // Let go of a received activation once its last reader here has it: the readers' graphs
  // keep it as long as backward needs it, and no longer (the planner counts it that way).
  if (p >= 0) {
    auto left = st.fetchesLeft.try_emplace({p, m}, schedule_.readsOn(p, st.me)).first;
    if (--left->second <= 0) st.received.erase({p, m});
  }
  return t;
}

torch::Tensor PipelineTrainer::runCell(StepState& st, const Cell& c, const std::vector<torch::Tensor>& in, bool bf16) {
  engine::AutocastScope autocast(bf16, deviceOf(c.stage).type());
  if (!spec_.recompute.count(schedule_.spec(c.stage).name)) return network_->runStage(c.stage, in);
  auto* rec = st.rec;
  auto fn = [this, c, rec](const std::vector<torch::Tensor>& x) {
    // Called again with grad on during backward: that call is the recompute.
    if (!rec || !torch::GradMode::is_enabled()) return network_->runStage(c.stage, x);
    const double start = rec->now();
    auto y = network_->runStage(c.stage, x);
    rec->add(laneOf(c.stage), schedule_.spec(c.stage).name, engine::SpanKind::Recompute, start,
             spanEnd(deviceOf(c.stage)), c.micro);
    return y;
  };
  return engine::runRecomputed(fn, in, network_->stageModule(c.stage)->parameters());
}

void PipelineTrainer::forwardCell(StepState& st, const Cell& c) {
  const auto& spec = schedule_.spec(c.stage);
  working_ = spec.name + microPhase("forward", c.micro, st.M);
  const torch::Device device = deviceOf(c.stage);
  const bool bf16 = spec_.precision.of(spec.name) == placement::Precision::BF16;
  std::vector<torch::Tensor> in;
  for (const auto& name : spec.inputs) {
    torch::Tensor t = fetch(st, name, c.micro).to(device);
    if (!bf16 && t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat);
    // Each stage's inputs are leaves of its own graph: backward runs stage by stage, and the
    // gradient of each input goes to its producer (here or on another rank).
    t = t.detach();
    if (schedule_.producer(name) >= 0 && t.is_floating_point()) t.requires_grad_(true);
    in.push_back(t);
  }
  const auto tc = Clock::now();
  const double forwardStart = st.rec ? st.rec->now() : 0.0;
  torch::Tensor out = runCell(st, c, in, bf16);
  st.compute += since(tc);
  if (st.rec) st.rec->add(laneOf(c.stage), spec.name, engine::SpanKind::Forward, forwardStart, spanEnd(device), c.micro);
  st.leaves[st.at(c.stage, c.micro)] = std::move(in);
  if (c.stage == st.head) headLoss(st, c, out);
  st.outputs[st.at(c.stage, c.micro)] = out;
  for (int r : schedule_.remoteReaders(c.stage))
    comm_.send(out, r, PipelineSchedule::tag(Message::Activation, c.stage, c.micro),
               microName(spec.name + "'s output", c.micro));
}

void PipelineTrainer::headLoss(StepState& st, const Cell& c, const torch::Tensor& out) {
  torch::Tensor target = st.me == 0 ? st.targets[c.micro]
                                    : comm_.recv(0, PipelineSchedule::tag(Message::Target, 0, c.micro),
                                                 microName("the labels", c.micro));
  working_ = "loss" + microPhase("forward", c.micro, st.M);
  const auto tl = Clock::now();
  const double lossStart = st.rec ? st.rec->now() : 0.0;
  target = target.to(out.device());
  auto r = engine::segmentationLoss(out, target);
  const double share = static_cast<double>(st.sizes[c.micro]) / spec_.batch;
  const double value = r.loss.item<double>();
  // A non-finite loss: the step runs to its end on every rank (its gradients unused) and is
  // refused on all of them before the optimizer (agreeLossIsFinite).
  if (!std::isfinite(value) && std::isfinite(st.nonFinite)) st.nonFinite = value, st.nonFiniteMicro = c.micro;
  st.losses[c.micro] = r.loss * share;
  st.lossValue += value * share;
  st.labels[c.micro] = engine::labelsFromLogits(out.detach().to(torch::kFloat)).cpu();
  st.headTargets[c.micro] = target.cpu();
  st.compute += since(tl);
  if (st.rec) st.rec->add(laneOf(c.stage), "loss", engine::SpanKind::Forward, lossStart, st.rec->now(), c.micro);
}

void PipelineTrainer::backwardCell(StepState& st, const Cell& c) {
  const auto& spec = schedule_.spec(c.stage);
  working_ = spec.name + microPhase("backward", c.micro, st.M);
  auto& out = st.outputs[st.at(c.stage, c.micro)];
  torch::Tensor grad = st.gradients[st.at(c.stage, c.micro)];
  const double waitStart = st.rec ? st.rec->now() : 0.0;
  if (c.stage != st.head) {
    for (int r : schedule_.remoteReaders(c.stage)) {
      auto g = comm_.recv(r, PipelineSchedule::tag(Message::Gradient, c.stage, c.micro),
                          microName("the gradient of " + spec.name + "'s output", c.micro))
                   .to(out.device());
      grad = grad.defined() ? grad + g : g;
    }
  }
  if (st.rec && c.stage != st.head && !schedule_.remoteReaders(c.stage).empty())
    st.rec->add(st.myLane, spec.name, engine::SpanKind::Wait, waitStart, st.rec->now(), c.micro);
  const auto tc = Clock::now();
  const double backwardStart = st.rec ? st.rec->now() : 0.0;
  if (c.stage == st.head) {
    torch::autograd::backward({st.losses[c.micro]});
    // The loss's graph reaches the head's input leaves, which hold the head's input and its
    // gradient: kept to the step's end, M micro-batches held 2 tensors each (RankMemoryTest).
    st.losses[c.micro] = torch::Tensor();
  } else if (grad.defined() && out.requires_grad()) {
    // Entered by the output's edge, as autograd::backward would, after letting the output go: its
    // storage then lives only as long as the graph saves it, and a recomputed stage's output
    // (computed without a graph) is freed before the recompute (the planner's StepSimulator does
    // the same).
    const auto root = torch::autograd::impl::gradient_edge(out);
    const torch::Tensor g = grad.to(out.scalar_type());
    out = torch::Tensor();
    torch::autograd::Engine::get_default_engine().execute({root}, {g}, /*keep_graph=*/false,
                                                          /*create_graph=*/false, /*accumulate_grad=*/true, {});
  }
  sendInputGradients(st, c);
  st.compute += since(tc);
  if (st.rec)
    st.rec->add(laneOf(c.stage), spec.name, engine::SpanKind::Backward, backwardStart, spanEnd(deviceOf(c.stage)), c.micro);
  // This cell's activations are no longer needed.
  out = torch::Tensor();
  st.leaves[st.at(c.stage, c.micro)].clear();
  st.gradients[st.at(c.stage, c.micro)] = torch::Tensor();
}

void PipelineTrainer::sendInputGradients(StepState& st, const Cell& c) {
  // Each input's gradient goes to its producer: added here when it runs on this rank, sent once
  // this rank's last reader of it has run its backward otherwise.
  const auto& spec = schedule_.spec(c.stage);
  auto& in = st.leaves[st.at(c.stage, c.micro)];
  for (std::size_t k = 0; k < spec.inputs.size(); ++k) {
    const int p = schedule_.producer(spec.inputs[k]);
    if (p < 0) continue;
    torch::Tensor g = in[k].grad();
    if (!g.defined()) g = torch::zeros_like(in[k]);
    if (schedule_.owner(p) == st.me) {
      auto& acc = st.gradients[st.at(p, c.micro)];
      g = g.to(st.outputs[st.at(p, c.micro)].device());
      acc = acc.defined() ? acc + g : g;
      continue;
    }
    const std::pair<int, int> key{p, c.micro};
    auto& acc = st.outgoing[key];
    acc = acc.defined() ? acc + g : g.detach();
    auto left = st.readsLeft.find(key);
    if (left == st.readsLeft.end()) left = st.readsLeft.emplace(key, schedule_.readsOn(p, st.me)).first;
    if (--left->second == 0) {
      comm_.send(acc, schedule_.owner(p), PipelineSchedule::tag(Message::Gradient, p, c.micro),
                 microName("the gradient of " + schedule_.spec(p).name + "'s output", c.micro));
      st.outgoing.erase(key);
    }
  }
}

double PipelineTrainer::optimizerStep(StepState& st) {
  const auto to = Clock::now();
  const double optimizerStart = st.rec ? st.rec->now() : 0.0;
  const double lr = spec_.learningRateAt(step_);
  engine::setLearningRate(*optimizer_, lr);
  working_ = "optimizer";
  engine::adamStep(*optimizer_);
  st.compute += since(to);
  if (st.rec) {
    std::vector<std::string> lanes;
    for (int i : schedule_.stagesOf(st.me))
      if (std::find(lanes.begin(), lanes.end(), laneOf(i)) == lanes.end()) lanes.push_back(laneOf(i));
    const double end = spanEnd(deviceOf(schedule_.stagesOf(st.me).front()));
    for (const auto& lane : lanes) st.rec->add(lane, "", engine::SpanKind::Optimizer, optimizerStart, end);
  }
  // Rank 0 draws the next batch while its GPU may still run this step's kernels (pinned memory), as
  // the Trainer does; on the CPU nothing would overlap.
  if (st.me == 0 && deviceOf(schedule_.stagesOf(0).front()).is_cuda() && engine::anotherStepFollows(spec_, step_ + 1))
    batches_.drawAhead(/*pinned=*/true);
  ++step_;
  return lr;
}

engine::StepMetrics PipelineTrainer::report(StepState& st, double lr, std::chrono::steady_clock::time_point t0) {
  const int me = st.me;
  // The head's rank knows loss and Dice (over the whole batch, as one process computes them).
  std::vector<double> result;
  if (me == schedule_.owner(st.head)) {
    const auto classes = network_->outChannels();
    result.push_back(st.lossValue);
    for (double d : engine::dicePerClass(torch::cat(st.labels), torch::cat(st.headTargets),
                                         classes == 1 ? 1 : static_cast<int>(classes - 1)))
      result.push_back(d);
  }
  engine::checkCpuBudget(meter_->cpu(), "r" + std::to_string(me) + ":cpu", "a training step");
  auto memory = meter_->read();
  std::int64_t peak = 0;
  for (const auto& d : memory) peak = std::max(peak, d.peak);
  const double wall = since(t0);
  const auto& cnt = comm_.counters();
  engine::RankStepStats mine{me, devices_[static_cast<std::size_t>(schedule_.stagesOf(me).front())].str(), st.compute,
                             cnt.waitSeconds, std::max(0.0, wall - st.compute - cnt.waitSeconds), cnt.bytesSent,
                             cnt.bytesReceived, peak};
  engine::StepMetrics m;
  if (me != 0) {
    if (me == schedule_.owner(st.head))
      comm_.send(torch::tensor(result, torch::kDouble), 0, PipelineSchedule::tag(Message::Result, 0, 0), "the loss");
    std::vector<double> figures = rankFigures(mine);
    if (st.rec) encodeSpans(st.rec->take(), figures);
    comm_.send(torch::tensor(figures, torch::kDouble), 0, PipelineSchedule::tag(Message::Stats, 0, 0), "the step's figures");
    comm_.flush();
    m.step = step_;
    return m;
  }
  if (schedule_.owner(st.head) != 0) {
    auto r = comm_.recv(schedule_.owner(st.head), PipelineSchedule::tag(Message::Result, 0, 0), "the loss");
    result.assign(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
  }
  m.ranks.push_back(mine);
  if (st.rec) m.timeline = st.rec->take();
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
  m.meanDice = engine::meanDice(m.dice);
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
  engine::averageDice(v, dices);
  return v;
}

void PipelineTrainer::run(engine::MetricsSink* sink, CancelToken* cancel) { engine::runTraining(*this, spec_, sink, cancel); }

} // namespace splitseg::ranks
