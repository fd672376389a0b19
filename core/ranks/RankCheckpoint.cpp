// PipelineTrainer's checkpoints: rank 0 keeps a full copy of the network; the owners of the other
// stages send it their weights and Adam state before it writes the Trainer's format, and rank 0
// sends each owner its part after reading one. Tensors go stage by stage, parameters then
// buffers, in the order the stage module lists them (the same network on every rank).
#include "core/ranks/PipelineTrainer.h"
#include "core/engine/OptimizerStep.h"
#include "core/engine/Trainer.h"

#include <torch/torch.h>

namespace splitseg::ranks {

namespace {
using torch::optim::AdamParamState;

AdamParamState& stateOf(torch::optim::Adam& adam, const torch::Tensor& p) {
  auto it = adam.state().find(p.unsafeGetTensorImpl());
  if (it == adam.state().end()) throw Error("internal: a parameter without Adam state");
  return static_cast<AdamParamState&>(*it->second);
}

void setState(torch::optim::Adam& adam, const torch::Tensor& p, std::int64_t step, const torch::Tensor& avg,
              const torch::Tensor& avgSq) {
  auto st = std::make_unique<AdamParamState>();
  st->step(step);
  st->exp_avg(avg.to(p.device()).clone());
  st->exp_avg_sq(avgSq.to(p.device()).clone());
  adam.state()[p.unsafeGetTensorImpl()] = std::move(st);
}

std::unique_ptr<torch::optim::Adam> fullOptimizer(model::StagedNetwork& net, double lr) {
  auto adam = std::make_unique<torch::optim::Adam>(net.root().parameters(), torch::optim::AdamOptions(lr));
  engine::allocateAdamState(*adam);
  return adam;
}
} // namespace

void sendWeightsFromRank0(Comm& comm, model::StagedNetwork& network, const PipelineSchedule& schedule) {
  torch::NoGradGuard noGrad;
  for (int i = 0; i < schedule.stageCount(); ++i) {
    const int owner = schedule.owner(i);
    if (owner == 0 || (comm.rank() != 0 && comm.rank() != owner)) continue;
    const std::string stage = schedule.spec(i).name;
    auto module = network.stageModule(i);
    int k = 0;
    auto tensors = module->parameters();
    for (auto& b : module->buffers()) tensors.push_back(b);
    for (auto& t : tensors) {
      const int tag = PipelineSchedule::tag(Message::State, i, k++);
      if (comm.rank() == 0) comm.send(t, owner, tag, stage + "'s weights");
      else t.copy_(comm.recv(0, tag, stage + "'s weights"));
    }
  }
  comm.flush();
}

void PipelineTrainer::scatter(bool withState, torch::optim::Adam* full) {
  if (!withState) {
    sendWeightsFromRank0(comm_, *network_, schedule_);
    return;
  }
  torch::NoGradGuard noGrad;
  const int me = comm_.rank();
  for (int i = 0; i < schedule_.stageCount(); ++i) {
    const int owner = schedule_.owner(i);
    auto module = network_->stageModule(i);
    const std::string stage = schedule_.spec(i).name;
    int k = 0;
    auto tag = [&]() { return PipelineSchedule::tag(Message::State, i, k++); };
    if (owner == 0) {
      if (me == 0 && withState)
        for (auto& p : module->parameters()) {
          auto& st = stateOf(*full, p);
          setState(*optimizer_, p, st.step(), st.exp_avg(), st.exp_avg_sq());
        }
      continue;
    }
    if (me == 0) {
      for (auto& p : module->parameters()) {
        comm_.send(p, owner, tag(), stage + "'s weights");
        if (!withState) continue;
        auto& st = stateOf(*full, p);
        comm_.send(st.exp_avg(), owner, tag(), stage + "'s optimizer state");
        comm_.send(st.exp_avg_sq(), owner, tag(), stage + "'s optimizer state");
        comm_.send(torch::tensor({st.step()}, torch::kLong), owner, tag(), stage + "'s optimizer state");
      }
      for (auto& b : module->buffers()) comm_.send(b, owner, tag(), stage + "'s buffers");
    } else if (me == owner) {
      for (auto& p : module->parameters()) {
        p.copy_(comm_.recv(0, tag(), stage + "'s weights"));
        if (!withState) continue;
        auto avg = comm_.recv(0, tag(), stage + "'s optimizer state");
        auto avgSq = comm_.recv(0, tag(), stage + "'s optimizer state");
        auto step = comm_.recv(0, tag(), stage + "'s optimizer state");
        setState(*optimizer_, p, step.item<std::int64_t>(), avg, avgSq);
      }
      for (auto& b : module->buffers()) b.copy_(comm_.recv(0, tag(), stage + "'s buffers"));
    }
  }
  comm_.flush();
}

void PipelineTrainer::gather(torch::optim::Adam* full, bool withState) {
  torch::NoGradGuard noGrad;
  const int me = comm_.rank();
  for (int i = 0; i < schedule_.stageCount(); ++i) {
    const int owner = schedule_.owner(i);
    auto module = network_->stageModule(i);
    const std::string stage = schedule_.spec(i).name;
    int k = 0;
    auto tag = [&]() { return PipelineSchedule::tag(Message::State, i, k++); };
    if (owner == 0) {
      if (me == 0 && withState)
        for (auto& p : module->parameters()) {
          auto& st = stateOf(*optimizer_, p);
          setState(*full, p, st.step(), st.exp_avg(), st.exp_avg_sq());
        }
      continue;
    }
    if (me == owner) {
      for (auto& p : module->parameters()) {
        comm_.send(p, 0, tag(), stage + "'s weights");
        if (!withState) continue;
        auto& st = stateOf(*optimizer_, p);
        comm_.send(st.exp_avg(), 0, tag(), stage + "'s optimizer state");
        comm_.send(st.exp_avg_sq(), 0, tag(), stage + "'s optimizer state");
        comm_.send(torch::tensor({st.step()}, torch::kLong), 0, tag(), stage + "'s optimizer state");
      }
      for (auto& b : module->buffers()) comm_.send(b, 0, tag(), stage + "'s buffers");
    } else if (me == 0) {
      const std::string from = "rank " + std::to_string(owner) + "'s " + stage;
      for (auto& p : module->parameters()) {
        p.copy_(comm_.recv(owner, tag(), from + " weights"));
        if (!withState) continue;
        auto avg = comm_.recv(owner, tag(), from + " optimizer state");
        auto avgSq = comm_.recv(owner, tag(), from + " optimizer state");
        auto step = comm_.recv(owner, tag(), from + " optimizer state");
        setState(*full, p, step.item<std::int64_t>(), avg, avgSq);
      }
      for (auto& b : module->buffers()) b.copy_(comm_.recv(owner, tag(), from + " buffers"));
    }
  }
  comm_.flush();
}

void PipelineTrainer::gatherWeights() { gather(nullptr, false); }

void PipelineTrainer::saveCheckpoint(const std::string& path) {
  std::unique_ptr<torch::optim::Adam> full;
  if (comm_.rank() == 0) full = fullOptimizer(*network_, spec_.learningRate);
  gather(full.get(), true);
  if (comm_.rank() != 0) return;
  engine::writeCheckpoint(path, *network_, *full, spec_, step_, batches_.state());
}

void PipelineTrainer::loadCheckpoint(const std::string& path, const checkpoint::CheckpointFile* file) {
  std::unique_ptr<torch::optim::Adam> full;
  const int stepTag = PipelineSchedule::tag(Message::State, 4095, 0);
  if (comm_.rank() == 0) {
    full = fullOptimizer(*network_, spec_.learningRate);
    auto info = file ? engine::readCheckpoint(*file, path, *network_, *full) : engine::readCheckpoint(path, *network_, *full);
    batches_.restore(info.sampleRng, path);
    step_ = info.step;
    for (int r = 1; r < comm_.size(); ++r)
      comm_.send(torch::tensor({step_}, torch::kLong), r, stepTag, "the checkpoint's step");
  } else {
    step_ = comm_.recv(0, stepTag, "the checkpoint's step").item<std::int64_t>();
  }
  scatter(true, full.get());
  // Reading put rank 0's weights on the CPU; its stages and their moments go back to their devices.
  moveOwnedToDevices();
  for (int i : schedule_.stagesOf(comm_.rank()))
    for (auto& p : network_->stageModule(i)->parameters()) {
      auto& st = stateOf(*optimizer_, p);
      st.exp_avg(st.exp_avg().to(p.device()));
      st.exp_avg_sq(st.exp_avg_sq().to(p.device()));
    }
}

} // namespace splitseg::ranks
