#include "core/ranks/PipelineInferer.h"
#include "core/base/Error.h"
#include "core/ranks/PipelineTrainer.h"
#include "core/ranks/RankPeaks.h"
#include "core/engine/AutocastScope.h"
#include "core/shard/HaloConv3d.h"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <optional>

namespace splitseg::ranks {

int controlTag() { return PipelineSchedule::tag(Message::Input, 4095, 4095); }

namespace {
int peaksTag() { return PipelineSchedule::tag(Message::Stats, 4095, 4095); }
} // namespace

PipelineInferer::PipelineInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run)
    : comm_(comm), network_(std::move(network)), spec_(std::move(run)),
      placement_(spec_.resolvePlacement(network_->stageNames(), "cpu")),
      schedule_(network_->stageSpecs(), stageOwners(placement_, comm.size()), 1) {
  devices_ = stageDevices(placement_);
  sendWeightsFromRank0(comm_, *network_, schedule_);
  for (int i : schedule_.stagesOf(comm_.rank())) network_->stageModule(i)->to(devices_[static_cast<std::size_t>(i)]);
  network_->root().eval();
  // CPU stages predict with their weights in NDHWC, as the one-process Inferer does (faster on
  // the CPU); the destructor gives them their layout back (rank 0's network may train again).
  for (int i : schedule_.stagesOf(comm_.rank()))
    if (devices_[static_cast<std::size_t>(i)].is_cpu())
      for (auto& p : engine::toChannelsLast(*network_->stageModule(i))) channelsLast_.push_back(p);
}

PipelineInferer::~PipelineInferer() { engine::restoreLayout(channelsLast_); }

torch::Tensor forwardOverRanks(Comm& comm_, model::StagedNetwork& network, const PipelineSchedule& schedule_,
                               const std::vector<torch::Device>& devices_, const placement::StagePrecisions& precision,
                               const torch::Tensor& input) {
  const int me = comm_.rank();
  const int head = schedule_.headStage();
  const int M = schedule_.microBatches();
  auto part = [](const std::string& what, int m) { return what + " of micro-batch " + std::to_string(m); };
  // outputs[stage][m]; what came from other ranks, by (producer, m).
  std::vector<std::vector<torch::Tensor>> outputs(static_cast<std::size_t>(schedule_.stageCount()),
                                                  std::vector<torch::Tensor>(static_cast<std::size_t>(M)));
  std::map<std::pair<int, int>, torch::Tensor> received;
  std::vector<torch::Tensor> inputs(static_cast<std::size_t>(M));
  if (me == 0) {
    const auto sizes = placement::PipelineOrder::microSizes(static_cast<int>(input.size(0)), M);
    const auto parts = input.split_with_sizes(std::vector<std::int64_t>(sizes.begin(), sizes.end()));
    for (int m = 0; m < M; ++m) {
      inputs[static_cast<std::size_t>(m)] = parts[static_cast<std::size_t>(m)].contiguous();
      for (int r : schedule_.inputReaders())
        comm_.send(inputs[static_cast<std::size_t>(m)], r, PipelineSchedule::tag(Message::Input, 0, m), part("the input windows", m));
    }
  }
  // What this rank still reads of each producer's output (-1: the input windows) per micro-batch:
  // a tensor is let go after its last reader here (what was sent stays with the send until the
  // pass's flush), so a rank holds one micro-batch's activations at a time, not the pass's.
  std::map<std::pair<int, int>, int> readsLeft;
  for (int s : schedule_.stagesOf(me))
    for (const auto& name : schedule_.spec(s).inputs)
      for (int m = 0; m < M; ++m) ++readsLeft[{schedule_.producer(name), m}];
  auto release = [&](const std::string& name, int m) {
    const int p = schedule_.producer(name);
    if (--readsLeft[{p, m}] > 0) return;
    if (p < 0 && me == 0) inputs[static_cast<std::size_t>(m)] = torch::Tensor();
    else if (p >= 0 && schedule_.owner(p) == me) outputs[static_cast<std::size_t>(p)][static_cast<std::size_t>(m)] = torch::Tensor();
    else received.erase({p, m});
  };
  auto fetch = [&](const std::string& name, int m) -> torch::Tensor {
    const int p = schedule_.producer(name);
    if (p < 0 && me == 0) return inputs[static_cast<std::size_t>(m)];
    if (p >= 0 && schedule_.owner(p) == me) return outputs[static_cast<std::size_t>(p)][static_cast<std::size_t>(m)];
    auto& slot = received[{p, m}];
    if (!slot.defined())
      slot = p < 0 ? comm_.recv(0, PipelineSchedule::tag(Message::Input, 0, m), part("the input windows", m))
                   : comm_.recv(schedule_.owner(p), PipelineSchedule::tag(Message::Activation, p, m),
                                part(schedule_.spec(p).name + "'s output", m));
    return slot;
  };
  // The wavefront order: with M > 1, this rank runs micro-batch m + 1 while the next rank runs m.
  std::vector<torch::Tensor> logits(static_cast<std::size_t>(M));
  for (const Cell& c : schedule_.forwardOrder(me)) {
    const auto& spec = schedule_.spec(c.stage);
    const torch::Device device = devices_[static_cast<std::size_t>(c.stage)];
    // Out of memory on this rank (its device, or the CPU budget) names the stage it ran.
    try {
      const bool bf16 = precision.of(spec.name) == placement::Precision::BF16;
      std::vector<torch::Tensor> in;
      for (const auto& name : spec.inputs) {
        torch::Tensor t = fetch(name, c.micro).to(device);
        if (!bf16 && t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat);
        in.push_back(t);
      }
      for (const auto& name : spec.inputs) release(name, c.micro);  // `in` holds them through the stage
      torch::Tensor out;
      {
        engine::AutocastScope autocast(bf16, device.type());
        out = network.runStage(c.stage, in);
      }
      in.clear();
      if (readsLeft[{c.stage, c.micro}] > 0) outputs[static_cast<std::size_t>(c.stage)][static_cast<std::size_t>(c.micro)] = out;
      for (int r : schedule_.remoteReaders(c.stage))
        comm_.send(out, r, PipelineSchedule::tag(Message::Activation, c.stage, c.micro), part(spec.name + "'s output", c.micro));
      if (c.stage == head) {
        if (me == 0) logits[static_cast<std::size_t>(c.micro)] = out.to(torch::kFloat);
        else comm_.send(out.to(torch::kFloat), 0, PipelineSchedule::tag(Message::Result, head, c.micro), part("the logits", c.micro));
      }
    } catch (const c10::OutOfMemoryError& e) {
      rethrowOutOfMemory(e, me, device, spec.name);
    }
  }
  torch::Tensor result;
  if (me == 0) {
    if (schedule_.owner(head) != 0)
      for (int m = 0; m < M; ++m)
        logits[static_cast<std::size_t>(m)] =
            comm_.recv(schedule_.owner(head), PipelineSchedule::tag(Message::Result, head, m), part("the logits", m));
    result = M == 1 ? logits.front() : torch::cat(logits, 0);
  }
  comm_.flush();
  return result;
}

const PipelineSchedule& PipelineInferer::scheduleFor(int microBatches) {
  auto it = schedules_.find(microBatches);
  if (it == schedules_.end())
    it = schedules_.emplace(microBatches, PipelineSchedule(network_->stageSpecs(), stageOwners(placement_, comm_.size()),
                                                           microBatches)).first;
  return it->second;
}

torch::Tensor PipelineInferer::forward(const torch::Tensor& batch) {
  if (comm_.rank() != 0) throw Error("internal: only rank 0 hands out windows");
  // A pass that stopped half-way (out of memory here, Cancel) left the others inside it: they
  // cannot take the next windows (`infer --dataset` goes on to its next case after such an error).
  if (midPass_)
    throw RankError("the ranks stopped inside an earlier pass (its error came first) and cannot predict more: start "
                    "the run again");
  // As many micro-batches as asked, at most one per window. The command tells the ranks how many
  // and the pass's windows: each micro-batch runs the convolution kernels of the whole pass (on the
  // CPU, oneDNN rather than batch 1's vol2col).
  const std::int64_t n = batch.size(0);
  const int m = static_cast<int>(std::min<std::int64_t>(std::max(1, spec_.microBatches), n));
  const auto command = torch::tensor({static_cast<std::int64_t>(m), n}, torch::kLong);
  midPass_ = true;  // from the command on, the others are in this pass
  for (int r = 1; r < comm_.size(); ++r) comm_.send(command, r, controlTag(), "a command");
  shard::WholeBatchScope whole(n);
  auto logits =
      forwardOverRanks(comm_, *network_, scheduleFor(m), devices_, spec_.precision, batch.to(torch::kCPU).contiguous());
  midPass_ = false;
  return logits;
}

void PipelineInferer::serve() {
  c10::InferenceMode inference;
  shard::OneDnnInferenceScope oneDnn;  // the kernels rank 0's Inferer runs
  std::vector<torch::nn::Module*> mine;
  for (int i : schedule_.stagesOf(comm_.rank())) mine.push_back(network_->stageModule(i).get());
  std::optional<PeakMeter> meter;
  meter.emplace(comm_.rank(), mine, spec_.cpuBudgetBytes);
  while (true) {
    const auto command = comm_.recv(0, controlTag(), "rank 0's next windows");
    const std::int64_t m = command[0].item<std::int64_t>();
    if (m == -1) {  // one prediction's peaks (restartOtherPeaks)
      sendPeaks(comm_, meter->peaks(), peaksTag());
      meter.reset();
      meter.emplace(comm_.rank(), mine, spec_.cpuBudgetBytes);
      continue;
    }
    if (m < 1) break;
    shard::WholeBatchScope whole(command.numel() > 1 ? command[1].item<std::int64_t>() : m);
    forwardOverRanks(comm_, *network_, scheduleFor(static_cast<int>(m)), devices_, spec_.precision, torch::Tensor());
  }
  sendPeaks(comm_, meter->peaks(), peaksTag());
  comm_.barrier("the end of inference");
}

std::map<std::string, std::int64_t> PipelineInferer::restartOtherPeaks() {
  if (comm_.rank() != 0 || finished_) return {};
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::full({1}, -1, torch::kLong), r, controlTag(), "a command");
  comm_.flush();
  return receivePeaks(comm_, peaksTag());
}

void PipelineInferer::finish() {
  if (finished_ || comm_.rank() != 0) return;
  finished_ = true;
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::zeros({1}, torch::kLong), r, controlTag(), "a command");
  peaks_ = receivePeaks(comm_, peaksTag());
  comm_.barrier("the end of inference");
}

} // namespace splitseg::ranks
