#include "core/dist/PipelineInferer.h"
#include "core/base/Error.h"
#include "core/dist/PipelineTrainer.h"
#include "core/engine/AutocastScope.h"

#include <torch/torch.h>

#include <map>

namespace splitseg::dist {

int controlTag() { return PipelineSchedule::tag(Message::Input, 4095, 4095); }

PipelineInferer::PipelineInferer(Comm& comm, std::shared_ptr<model::StagedNetwork> network, run::RunSpec run)
    : comm_(comm), network_(std::move(network)), spec_(std::move(run)),
      placement_(spec_.resolvePlacement(network_->stageNames(), "cpu")),
      schedule_(network_->stageSpecs(), stageOwners(placement_, comm.size()), 1) {
  devices_ = stageDevices(placement_);
  sendWeightsFromRank0(comm_, *network_, schedule_);
  for (int i : schedule_.stagesOf(comm_.rank())) network_->stageModule(i)->to(devices_[static_cast<std::size_t>(i)]);
  network_->root().eval();
}

torch::Tensor forwardOverRanks(Comm& comm_, model::StagedNetwork& network, const PipelineSchedule& schedule_,
                               const std::vector<torch::Device>& devices_, const placement::StagePrecisions& precision,
                               const torch::Tensor& input) {
  const int me = comm_.rank();
  const int head = schedule_.headStage();
  std::vector<torch::Tensor> outputs(static_cast<std::size_t>(schedule_.stageCount()));
  std::map<int, torch::Tensor> received;
  auto fetch = [&](const std::string& name) -> torch::Tensor {
    const int p = schedule_.producer(name);
    if (p < 0 && me == 0) return input;
    if (p >= 0 && schedule_.owner(p) == me) return outputs[static_cast<std::size_t>(p)];
    auto& slot = received[p];
    if (!slot.defined())
      slot = p < 0 ? comm_.recv(0, PipelineSchedule::tag(Message::Input, 0, 0), "the input windows")
                   : comm_.recv(schedule_.owner(p), PipelineSchedule::tag(Message::Activation, p, 0),
                                schedule_.spec(p).name + "'s output");
    return slot;
  };
  if (me == 0)
    for (int r : schedule_.inputReaders())
      comm_.send(input, r, PipelineSchedule::tag(Message::Input, 0, 0), "the input windows");
  for (const Cell& c : schedule_.forwardOrder(me)) {
    const auto& spec = schedule_.spec(c.stage);
    const torch::Device device = devices_[static_cast<std::size_t>(c.stage)];
    const bool bf16 = precision.of(spec.name) == placement::Precision::BF16;
    std::vector<torch::Tensor> in;
    for (const auto& name : spec.inputs) {
      torch::Tensor t = fetch(name).to(device);
      if (!bf16 && t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat);
      in.push_back(t);
    }
    torch::Tensor out;
    {
      engine::AutocastScope autocast(bf16, device.type());
      out = network.runStage(c.stage, in);
    }
    outputs[static_cast<std::size_t>(c.stage)] = out;
    for (int r : schedule_.remoteReaders(c.stage))
      comm_.send(out, r, PipelineSchedule::tag(Message::Activation, c.stage, 0), spec.name + "'s output");
  }
  torch::Tensor logits;
  if (schedule_.owner(head) == me) {
    logits = outputs[static_cast<std::size_t>(head)].to(torch::kFloat);
    if (me != 0) comm_.send(logits, 0, PipelineSchedule::tag(Message::Result, head, 0), "the logits");
  } else if (me == 0) {
    logits = comm_.recv(schedule_.owner(head), PipelineSchedule::tag(Message::Result, head, 0), "the logits");
  }
  comm_.flush();
  return logits;
}

torch::Tensor PipelineInferer::forward(const torch::Tensor& batch) {
  if (comm_.rank() != 0) throw Error("internal: only rank 0 hands out windows");
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::ones({1}, torch::kLong), r, controlTag(), "a command");
  return forwardOverRanks(comm_, *network_, schedule_, devices_, spec_.precision, batch.to(torch::kCPU).contiguous());
}

void PipelineInferer::serve() {
  c10::InferenceMode inference;
  while (comm_.recv(0, controlTag(), "rank 0's next windows").item<std::int64_t>() == 1)
    forwardOverRanks(comm_, *network_, schedule_, devices_, spec_.precision, torch::Tensor());
  comm_.barrier("the end of inference");
}

void PipelineInferer::finish() {
  if (finished_ || comm_.rank() != 0) return;
  finished_ = true;
  for (int r = 1; r < comm_.size(); ++r) comm_.send(torch::zeros({1}, torch::kLong), r, controlTag(), "a command");
  comm_.barrier("the end of inference");
}

} // namespace splitseg::dist
