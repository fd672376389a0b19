#include "core/ranks/SpatialTrainer.h"
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/ranks/RankFigures.h"
#include "core/ranks/RankShardComm.h"
#include "core/ranks/ExecutionMode.h"
#include "core/ranks/RankTrainingMode.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/Recompute.h"
#include "core/engine/OptimizerStep.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"
#include "core/placement/PipelineOrder.h"
#include "core/shard/HaloConv3d.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

namespace splitseg::ranks {

namespace {
// Message tags of the trainer's own traffic (validation's slabs, commands, figures, weights);
// RankShardComm's start at kHaloTags each step.
constexpr int kInputTag = 11, kOutputTag = 12, kControlTag = 14, kStatsTag = 15, kWeightTags = 100000,
              kBufferTags = 700000, kHaloTags = 1000;
// Gradients summed over the ranks: tags of RankShardComm's second instance, away from the halos'.
constexpr int kReduceTags = 500000;
// Micro-batch m's input slab, output slab and its gradient: kMicroTags + 3m + 0, 1, 2.
constexpr int kMicroTags = 300000;

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
} // namespace

bool SpatialTrainer::applies(const placement::Placement& p, int worldSize) {
  return executionModeOf(p, worldSize) == ExecutionMode::Sharded;
}

SpatialTrainer::SpatialTrainer(Comm& comm, std::shared_ptr<model::StagedNetwork> network,
                               std::shared_ptr<data::SampleSource> source, run::RunSpec run)
    : RankTrainingMode(comm), network_(std::move(network)), source_(std::move(source)), spec_(std::move(run)),
      batches_(source_, spec_, network_->outChannels()) {
  const auto placement = spec_.resolvePlacement(network_->stageNames(), "cpu");
  if (!applies(placement, comm_.size()))
    throw InvalidArgument("placement: spatial training over ranks needs every stage on the same ranks' devices, each rank once");
  if (!network_->supportsSharding())
    throw InvalidArgument("the " + network_->architecture() + " architecture does not support sharded stages");
  if (spec_.microBatches < 1 || spec_.microBatches > spec_.batch)
    throw InvalidArgument("micro_batches: must be 1.." + std::to_string(spec_.batch) + " (the batch)");
  if (comm_.rank() == 0 && !source_) throw InvalidArgument("rank 0 needs the training data");
  const std::string entry = placement.entryOf(placement.stages().front());
  ranks_ = SpatialRanks::of(placement, comm_.rank());
  // The cut, from the patch (the same on every rank): x, y, z -> D = z, H = y, W = x.
  const int axis = static_cast<int>(spec_.shardAxis);
  const std::int64_t extent = spec_.patch[static_cast<std::size_t>(2 - axis)];
  const std::int64_t multiple = network_->sizeDivisor();
  auto given = spec_.shardSlabs.find(entry);
  if (given != spec_.shardSlabs.end()) {
    layout_.axis = spec_.shardAxis;
    layout_.sizes = given->second;
  } else {
    layout_ = placement::ShardLayout::even(spec_.shardAxis, extent, static_cast<int>(ranks_.group.size()), multiple);
  }
  int deepest = 0;
  for (const auto& s : network_->stageSpecs()) deepest = std::max(deepest, s.level);
  layout_.check(extent, multiple, deepest, network_->stageNames().front());

  network_->root().to(ranks_.device);
  meter_ = std::make_unique<engine::MemoryMeter>(std::vector<std::string>{ranks_.device.str()});
  optimizer_ = std::make_unique<torch::optim::Adam>(network_->root().parameters(),
                                                    torch::optim::AdamOptions(spec_.learningRate));
  engine::allocateAdamState(*optimizer_);
  // The run's CPU budget holds on every rank, as the Trainer keeps to it in one process.
  engine::applyCpuBudget(meter_->cpu(), spec_.cpuBudgetBytes, *optimizer_);
  shareFromRankZero(false);  // one set of initial weights: rank 0's
  torch::manual_seed(spec_.seed);  // as the Trainer restarts LibTorch's generator after building
}

void SpatialTrainer::shareFromRankZero(bool withState) {
  torch::NoGradGuard noGrad;
  int tag = kWeightTags;
  auto share = [&](torch::Tensor t) {
    if (comm_.rank() == 0) {
      for (int r = 1; r < comm_.size(); ++r) comm_.send(t, r, tag, "rank 0's weights");
    } else {
      t.copy_(comm_.recv(0, tag, "rank 0's weights").to(t.device(), t.scalar_type()));
    }
    ++tag;
  };
  for (auto& p : network_->root().parameters()) {
    share(p);
    if (!withState) continue;
    auto it = optimizer_->state().find(p.unsafeGetTensorImpl());
    if (it == optimizer_->state().end()) throw Error("internal: a parameter without Adam state");
    auto& st = static_cast<torch::optim::AdamParamState&>(*it->second);
    torch::Tensor step = torch::tensor({st.step()}, torch::kLong);
    share(step);
    st.step(step.item<std::int64_t>());
    share(st.exp_avg());
    share(st.exp_avg_sq());
  }
  for (auto& b : network_->root().buffers()) share(b);
  comm_.flush();
}

void SpatialTrainer::loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file) {
  torch::Tensor step = torch::zeros({1}, torch::kLong);
  if (comm_.rank() == 0) {
    const auto info =
        file ? engine::readCheckpoint(*file, path, *network_, *optimizer_) : engine::readCheckpoint(path, *network_, *optimizer_);
    batches_.restore(info.sampleRng, path);
    step[0] = info.step;
    // Reading put the weights and moments on the CPU: back to this rank's device.
    network_->root().to(ranks_.device);
    for (auto& p : network_->root().parameters()) {
      auto& st = static_cast<torch::optim::AdamParamState&>(*optimizer_->state().at(p.unsafeGetTensorImpl()));
      st.exp_avg(st.exp_avg().to(ranks_.device));
      st.exp_avg_sq(st.exp_avg_sq().to(ranks_.device));
    }
    for (int r = 1; r < comm_.size(); ++r) comm_.send(step, r, kWeightTags - 1, "the checkpoint's step");
    comm_.flush();
  } else {
    step = comm_.recv(0, kWeightTags - 1, "the checkpoint's step");
  }
  step_ = step.item<std::int64_t>();
  shareFromRankZero(true);
}

SpatialTrainer::~SpatialTrainer() = default;

SpatialRanks SpatialRanks::of(const placement::Placement& placement, int rank) {
  SpatialRanks r;
  bool found = false;
  const auto shards = placement::splitShards(placement.entryOf(placement.stages().front()));
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const auto rd = placement::splitRank(shards[k]);
    r.group.push_back(rd.rank);
    if (rd.rank == rank) {
      r.index = static_cast<int>(k);
      r.device = torch::Device(rd.device);
      found = true;
    }
  }
  if (!found) throw InvalidArgument("placement: rank " + std::to_string(rank) + " holds no slab of the sharded stages");
  return r;
}

torch::Tensor SpatialRanks::scatter(Comm& comm, const torch::Tensor& whole, int dim, const std::vector<std::int64_t>& sizes,
                                    int tag, const std::string& what) const {
  torch::Tensor mine;
  std::int64_t offset = 0;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const auto piece = whole.narrow(dim, offset, sizes[k]).contiguous();
    offset += sizes[k];
    if (group[k] == 0) mine = piece;
    else comm.send(piece, group[k], tag, what);
  }
  comm.flush();
  return mine;
}

std::vector<torch::Tensor> SpatialRanks::gather(Comm& comm, const torch::Tensor& mine, int tag, const std::string& what) const {
  std::vector<torch::Tensor> parts;
  for (const int r : group) parts.push_back(r == 0 ? mine : comm.recv(r, tag, what).to(device));
  return parts;
}

torch::Tensor forwardSlab(model::StagedNetwork& network, const run::RunSpec& run, RankShardComm& shards,
                          torch::Device device, const torch::Tensor& slab) {
  std::map<std::string, torch::Tensor> out{{model::kInput, slab}};
  torch::Tensor last;
  const auto specs = network.stageSpecs();
  // In inference nothing is saved for a backward: an output goes after its last reader (as
  // engine::SplitExecutor does), so a rank holds the skips still to be read, not every stage's output.
  std::map<std::string, std::size_t> lastReader;
  for (std::size_t i = 0; i < specs.size(); ++i)
    for (const auto& n : specs[i].inputs) lastReader[n] = i;
  const bool release = c10::InferenceMode::is_enabled();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::vector<torch::Tensor> in;
    const bool bf16 = run.precision.of(specs[i].name) == placement::Precision::BF16;
    for (const auto& n : specs[i].inputs) {
      torch::Tensor t = out.at(n);
      if (!bf16 && t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat);
      in.push_back(t);
    }
    if (release)
      for (const auto& n : specs[i].inputs)
        if (lastReader.at(n) == i) out.erase(n);  // `in` holds it through the stage
    engine::AutocastScope autocast(bf16, device.type());
    // The recomputation of a checkpointed stage runs in backward, on autograd's thread: the stage
    // function installs the slab's transport itself.
    auto stage = [&network, i, &shards](const std::vector<torch::Tensor>& x) {
      shard::ShardScope scope(&shards);
      return network.runStage(i, x);
    };
    last = run.recompute.count(specs[i].name) ? engine::runRecomputed(stage, in, network.stageModule(i)->parameters())
                                              : stage(in);
    out[specs[i].name] = last;
  }
  return last.to(torch::kFloat);
}

// One step's batch and running figures between the phases of SpatialTrainer::step.
struct SpatialTrainer::StepState {
  int me = 0, dim = 2, M = 1;
  std::vector<std::int64_t> sizes;  // micro-batch sizes
  torch::Tensor input, target;      // rank 0: the batch
  double lossValue = 0;
  double nonFinite = 0;  // rank 0: the first non-finite micro-batch loss
  int nonFiniteMicro = -1;
  std::vector<torch::Tensor> labels, targets;
  std::int64_t first = 0;  // the micro-batch's first sample
};

engine::StepMetrics SpatialTrainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  // This rank's memory peak of the step (on the CPU the allocations the step makes, as the
  // one-process Trainer counts them: weights and Adam's moments exist before the first step).
  engine::CpuMemoryScope scope(meter_->cpu());
  meter_->cpu().clearExceeded();
  meter_->resetPeaks();
  network_->root().train();
  working_ = "batch";
  optimizer_->zero_grad(true);
  StepState st;
  st.me = comm_.rank();
  st.dim = 2 + static_cast<int>(spec_.shardAxis);
  // Fresh tags every step: the transports' counters start again where every rank expects them.
  RankShardComm shards(comm_, ranks_.group, ranks_.device, st.dim, kHaloTags);

  // Micro-batches run one after another, each through forward and backward before the next, their
  // parameter gradients adding up: activations of one micro-batch at a time. The loss is a mean
  // over samples (soft Dice per sample, cross-entropy per voxel), so the micro-batches' losses
  // weighted by their share of the batch are the batch's loss, as on the pipeline's ranks.
  const auto sizes = placement::PipelineOrder::microSizes(spec_.batch, spec_.microBatches);
  st.sizes.assign(sizes.begin(), sizes.end());
  shard::WholeBatchScope whole(spec_.batch);  // a micro-batch runs the kernels its whole batch would
  st.M = static_cast<int>(st.sizes.size());
  if (st.me == 0) batches_.next(st.input, st.target);  // labels checked
  for (int mb = 0; mb < st.M; ++mb) microBatch(st, shards, mb);
  working_ = "the step's loss";
  try {
    agreeLossIsFinite(comm_, 0, step_ + 1, st.nonFinite, st.nonFiniteMicro);
  } catch (const engine::NonFiniteLoss&) {
    optimizer_->zero_grad(true);
    throw;
  }
  engine::StepMetrics m;
  if (st.me == 0) {
    // Loss and Dice over the whole batch, as one process computes them.
    const auto classes = network_->outChannels();
    m.loss = st.lossValue;
    m.dice = engine::dicePerClass(torch::cat(st.labels), torch::cat(st.targets), classes == 1 ? 1 : static_cast<int>(classes - 1));
    m.meanDice = engine::meanDice(m.dice);
  }
  sumGradients(st.dim);
  const double lr = spec_.learningRateAt(step_);
  engine::setLearningRate(*optimizer_, lr);
  working_ = "optimizer";
  optimizer_->step();
  syncBuffers();
  // Rank 0 draws the next batch while its GPU may still run this step (pinned memory), as the
  // Trainer does; on the CPU nothing would overlap.
  if (st.me == 0 && ranks_.device.is_cuda() && engine::anotherStepFollows(spec_, step_ + 1)) batches_.drawAhead(/*pinned=*/true);
  ++step_;
  m.step = step_;
  m.totalSteps = spec_.totalSteps();
  m.learningRate = lr;
  m.seconds = since(t0);
  gatherRankFigures(m);
  return m;
}

void SpatialTrainer::microBatch(StepState& st, RankShardComm& shards, int mb) {
  const int inTag = kMicroTags + 3 * mb, outTag = inTag + 1, gradTag = inTag + 2;
  const auto size = st.sizes[static_cast<std::size_t>(mb)];
  torch::Tensor slab = st.me == 0 ? ranks_.scatter(comm_, st.input.narrow(0, st.first, size), st.dim, layout_.sizes, inTag,
                                                   "an input slab")
                                  : comm_.recv(0, inTag, "this rank's input slab");
  const auto micro = st.M > 1 ? ", micro-batch " + std::to_string(mb + 1) + " of " + std::to_string(st.M) : std::string();
  working_ = "this rank's slab of every stage (forward" + micro + ")";
  torch::Tensor out = forwardSlab(*network_, spec_, shards, ranks_.device, slab.to(ranks_.device));
  working_ = "this rank's slab of every stage (loss and backward" + micro + ")";
  slab = torch::Tensor();
  if (st.me != 0) {
    comm_.send(out.detach(), 0, outTag, "this rank's output slab");
    comm_.flush();
    out.backward(comm_.recv(0, gradTag, "this rank's output gradient").to(ranks_.device));
    st.first += size;
    return;
  }
  // The loss over the whole volume: every rank's output slab, as leaves whose gradients go back.
  auto leaves = ranks_.gather(comm_, out.detach(), outTag, "an output slab");
  for (auto& leaf : leaves) leaf.requires_grad_(true);
  const auto logits = torch::cat(leaves, st.dim);
  const auto microTarget = st.target.narrow(0, st.first, size).to(ranks_.device);
  auto r = engine::segmentationLoss(logits, microTarget);
  const double value = r.loss.item<double>();
  // A non-finite loss: the step runs to its end on every rank (its gradients unused) and is
  // refused on all of them before the optimizer (agreeLossIsFinite).
  if (!std::isfinite(value) && std::isfinite(st.nonFinite)) st.nonFinite = value, st.nonFiniteMicro = st.M > 1 ? mb : -1;
  const double share = static_cast<double>(size) / spec_.batch;
  st.lossValue += value * share;
  (r.loss * share).backward();
  st.labels.push_back(engine::labelsFromLogits(logits.detach()).cpu());
  st.targets.push_back(microTarget.cpu());
  // Every other rank's gradient first: the backward passes exchange halos with each other.
  torch::Tensor mine;
  for (std::size_t k = 0; k < ranks_.group.size(); ++k) {
    if (ranks_.group[k] == 0) mine = leaves[k].grad();
    else comm_.send(leaves[k].grad(), ranks_.group[k], gradTag, "an output slab's gradient");
  }
  out.backward(mine);
  comm_.flush();
  st.first += size;
}

void SpatialTrainer::sumGradients(int dim) {
  // The replicas' gradients summed over the ranks (in slab order: the same numbers everywhere).
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> flat;
  auto params = network_->root().parameters();
  for (auto& p : params) flat.push_back(p.grad().defined() ? p.grad().flatten() : torch::zeros({p.numel()}, p.options()));
  RankShardComm reduce(comm_, ranks_.group, ranks_.device, dim, kReduceTags);
  const torch::Tensor sum = reduce.allReduceSum(torch::cat(flat));
  std::int64_t at = 0;
  for (auto& p : params) {
    auto g = sum.narrow(0, at, p.numel()).view_as(p);
    if (p.grad().defined()) p.mutable_grad().copy_(g);
    else p.mutable_grad() = g.clone();
    at += p.numel();
  }
}

void SpatialTrainer::gatherRankFigures(engine::StepMetrics& m) {
  // Every rank's figures to rank 0 (compute = the step's time not spent waiting for another rank;
  // all ranks run every layer at once, so there is no idle time apart from those waits).
  const int me = comm_.rank();
  engine::checkCpuBudget(meter_->cpu(), "r" + std::to_string(me) + ":cpu", "a training step");
  std::int64_t peak = 0;
  for (const auto& d : meter_->read()) peak = std::max(peak, d.peak);
  const auto& cnt = comm_.counters();
  engine::RankStepStats mine{me, ranks_.device.str(), std::max(0.0, m.seconds - cnt.waitSeconds), cnt.waitSeconds, 0.0,
                             cnt.bytesSent, cnt.bytesReceived, peak};
  if (me != 0) {
    comm_.send(torch::tensor(rankFigures(mine), torch::kDouble), 0, kStatsTag, "the step's figures");
    comm_.flush();
  } else {
    m.ranks.push_back(mine);
    for (int r = 1; r < comm_.size(); ++r) {
      const auto f = comm_.recv(r, kStatsTag, "the step's figures");
      if (f.scalar_type() != torch::kDouble) throw RankError("rank " + std::to_string(r) + " sent a malformed step summary");
      m.ranks.push_back(rankStatsFrom(r, std::vector<double>(f.data_ptr<double>(), f.data_ptr<double>() + f.numel())));
    }
    for (auto& rs : m.ranks)
      if (rs.device.empty()) rs.device = ranks_.device.str();  // the device named in rank r's placement entry
  }
  comm_.counters() = {};
}

void SpatialTrainer::syncBuffers() {
  torch::NoGradGuard noGrad;
  const int source = ranks_.group.front();
  int tag = kBufferTags;
  for (auto& b : network_->root().buffers()) {
    if (comm_.rank() == source) {
      for (int r = 0; r < comm_.size(); ++r)
        if (r != source) comm_.send(b, r, tag, "the running statistics");
    } else {
      b.copy_(comm_.recv(source, tag, "the running statistics").to(b.device(), b.scalar_type()));
    }
    ++tag;
  }
  comm_.flush();
}

engine::ValidationMetrics SpatialTrainer::validate() {
  working_ = "validation";
  torch::NoGradGuard noGrad;
  engine::EvalModeGuard eval(network_->root());
  engine::ValidationMetrics v;
  v.step = step_;
  const int dim = 2 + static_cast<int>(spec_.shardAxis);
  auto command = [&](std::int64_t c) {
    for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::tensor({c}, torch::kLong), r, kControlTag, "a command");
  };
  if (comm_.rank() != 0) {
    while (comm_.recv(0, kControlTag, "rank 0's next validation sample").item<std::int64_t>() == 1) {
      RankShardComm shards(comm_, ranks_.group, ranks_.device, dim, kHaloTags);
      const auto slab = comm_.recv(0, kInputTag, "a validation slab");
      comm_.send(forwardSlab(*network_, spec_, shards, ranks_.device, slab.to(ranks_.device)), 0, kOutputTag, "this rank's output slab");
      comm_.flush();
    }
    return v;
  }
  const auto samples = batches_.validationSamples();
  std::vector<std::vector<double>> dices;
  for (const auto& sample : samples) {
    command(1);
    const auto input = engine::toTensor(sample.channels).unsqueeze(0);
    const auto target = engine::toTensor(sample.label).round().to(torch::kLong).unsqueeze(0);
    RankShardComm shards(comm_, ranks_.group, ranks_.device, dim, kHaloTags);
    const auto mine = ranks_.scatter(comm_, input, dim, layout_.sizes, kInputTag, "a validation slab");
    const auto out = forwardSlab(*network_, spec_, shards, ranks_.device, mine.to(ranks_.device));
    const auto parts = ranks_.gather(comm_, out, kOutputTag, "an output slab");
    auto r = engine::segmentationLoss(torch::cat(parts, dim), target.to(ranks_.device));
    v.loss += r.loss.item<double>() / static_cast<double>(samples.size());
    dices.push_back(r.dice);
  }
  command(0);
  comm_.flush();
  v.cases = static_cast<int>(samples.size());
  engine::averageDice(v, dices);
  return v;
}

void SpatialTrainer::saveCheckpoint(const std::string& path) {
  if (comm_.rank() != 0) return;
  engine::writeCheckpoint(path, *network_, *optimizer_, spec_, step_, batches_.state());
}

void SpatialTrainer::run(engine::MetricsSink* sink, CancelToken* cancel) { engine::runTraining(*this, spec_, sink, cancel); }

} // namespace splitseg::ranks
