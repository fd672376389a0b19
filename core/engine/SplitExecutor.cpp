#include "core/engine/SplitExecutor.h"
#include "core/base/Error.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/StageCheckpoint.h"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

namespace splitseg::engine {

SplitExecutor::SplitExecutor(std::shared_ptr<model::StagedNetwork> network, placement::Placement placement,
                             placement::StagePrecisions precision, std::set<std::string> recompute)
    : network_(std::move(network)), precision_(std::move(precision)), recompute_(std::move(recompute)),
      specs_(network_->stageSpecs()) {
  setPlacement(placement);
}

void SplitExecutor::setPlacement(const placement::Placement& p) {
  const auto names = network_->stageNames();
  if (p.stages() != names) throw InvalidArgument("placement does not list the network's stages in order");
  std::vector<std::string> available{"cpu"};
  for (std::size_t i = 0; i < torch::cuda::device_count(); ++i) available.push_back("cuda:" + std::to_string(i));
  p.checkDevices(available);
  setCpuChannelsLast(false);  // layouts are per device: start from the default one
  std::vector<torch::Device> devices;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    torch::Device d(p.deviceOf(specs_[i].name));
    network_->stageModule(i)->to(d);
    devices.push_back(d);
  }
  placement_ = p;
  stageDevices_ = std::move(devices);
}

void SplitExecutor::setCpuChannelsLast(bool enabled) {
  torch::NoGradGuard noGrad;
  if (!enabled) {
    for (auto& p : channelsLast_) p.set_data(p.contiguous());
    channelsLast_.clear();
    return;
  }
  if (!channelsLast_.empty()) return;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (!stageDevices_[i].is_cpu()) continue;
    for (auto& p : network_->stageModule(i)->parameters()) {
      if (p.dim() != 5 || p.is_contiguous(at::MemoryFormat::ChannelsLast3d)) continue;
      p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast3d));
      channelsLast_.push_back(p);
    }
  }
}

torch::Device SplitExecutor::inputDevice() const { return stageDevices_.front(); }
torch::Device SplitExecutor::outputDevice() const { return stageDevices_.back(); }

torch::Tensor SplitExecutor::moveTo(const torch::Tensor& t, const torch::Device& d) const {
  if (t.device() == d) return t;
  if (t.device().is_cpu() && d.is_cuda()) {
    // Pinned host memory lets the copy run asynchronously on the stream.
    return t.pin_memory().to(d, /*non_blocking=*/true);
  }
  // Device-to-host copies stay blocking: the CPU stage reads the data right away.
  return t.to(d, /*non_blocking=*/d.is_cuda());
}

torch::Tensor SplitExecutor::forward(const torch::Tensor& input) {
  // Index of each output by name; outputs dropped after their last consumer so inference
  // keeps only live tensors (training keeps what autograd saved anyway).
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::size_t> lastUse;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    index[specs_[i].name] = i;
    for (const auto& in : specs_[i].inputs) lastUse[in] = i;
  }
  std::vector<torch::Tensor> outputs(specs_.size());
  torch::Tensor networkInput = input;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const auto& spec = specs_[i];
    const torch::Device& device = stageDevices_[i];
    currentStage_ = spec.name;
    std::vector<torch::Tensor> inputs;
    const bool bf16 = precision_.of(spec.name) == placement::Precision::BF16;
    for (const auto& name : spec.inputs) {
      const torch::Tensor& src = name == model::kInput ? networkInput : outputs.at(index.at(name));
      torch::Tensor in = moveTo(src, device);
      // Outside autocast a bf16 activation would meet fp32 weights: cast it up.
      if (!bf16 && in.scalar_type() == torch::kBFloat16) in = in.to(torch::kFloat);
      inputs.push_back(in);
    }
    for (const auto& name : spec.inputs) {
      if (lastUse.at(name) != i) continue;
      if (name == model::kInput) networkInput = torch::Tensor();
      else outputs[index.at(name)] = torch::Tensor();
    }
    try {
      AutocastScope autocast(bf16, device.type());
      if (recompute_.count(spec.name) && torch::GradMode::is_enabled()) {
        auto stage = [this, i](const std::vector<torch::Tensor>& in) { return network_->runStage(i, in); };
        outputs[i] = runCheckpointed(stage, inputs, network_->stageModule(i)->parameters());
      } else {
        outputs[i] = network_->runStage(i, inputs);
      }
    } catch (const c10::OutOfMemoryError& e) {
      throw OutOfMemoryError(device.str(), spec.name, "CUDA allocator: " + std::string(e.what_without_backtrace()));
    }
    if (afterStage_) afterStage_(spec.name, device);
    if (outputObserver_) outputObserver_(spec.name, outputs[i]);
    if (backwardHook_ && outputs[i].requires_grad()) {
      auto hook = backwardHook_;
      const std::string name = spec.name;
      outputs[i].register_hook([hook, name](torch::Tensor grad) {
        hook(name);
        return grad;
      });
    }
  }
  return outputs.back().to(torch::kFloat);
}

} // namespace splitseg::engine
