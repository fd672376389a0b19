#include "core/engine/OptimizerStep.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/MemoryMeter.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <tuple>

namespace splitseg::engine {

namespace {
torch::optim::AdamParamState* stateOf(torch::optim::Adam& adam, const torch::Tensor& p) {
  auto it = adam.state().find(p.unsafeGetTensorImpl());
  return it == adam.state().end() ? nullptr : static_cast<torch::optim::AdamParamState*>(it->second.get());
}
} // namespace

std::int64_t cpuBytesHeld(const torch::optim::Adam& adam) {
  const auto bytes = [](const torch::Tensor& t) { return t.defined() && t.is_cpu() ? t.numel() * t.element_size() : 0; };
  std::int64_t held = 0;
  for (const auto& group : adam.param_groups())
    for (const auto& p : group.params()) {
      held += bytes(p);
      auto it = adam.state().find(p.unsafeGetTensorImpl());
      if (it == adam.state().end()) continue;
      const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
      held += bytes(st.exp_avg()) + bytes(st.exp_avg_sq()) + bytes(st.max_exp_avg_sq());
    }
  return held;
}

std::string cpuBudgetText(const CpuMemoryCounter& counter) {
  std::string text = "the CPU budget of " + formatBytes(double(counter.budget()));
  if (counter.held() > 0) text += " (the weights and Adam's moments hold " + formatBytes(double(counter.held())) + " of it)";
  return text;
}

void applyCpuBudget(CpuMemoryCounter& counter, std::int64_t budget, const torch::optim::Adam& adam) {
  counter.setBudget(budget);
  counter.setHeld(cpuBytesHeld(adam));
}

void checkCpuBudget(const CpuMemoryCounter& counter, const std::string& device, const std::string& stage) {
  if (counter.exceeded()) throw OutOfMemoryError(device, stage, "allocation beyond " + cpuBudgetText(counter));
}

void allocateAdamState(torch::optim::Adam& adam) {
  torch::NoGradGuard noGrad;
  for (auto& group : adam.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      if (stateOf(adam, p)) continue;
      auto state = std::make_unique<torch::optim::AdamParamState>();
      state->step(0);
      state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      if (options.amsgrad()) state->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      adam.state()[p.unsafeGetTensorImpl()] = std::move(state);
    }
  }
}

void setLearningRate(torch::optim::Adam& adam, double lr) {
  for (auto& group : adam.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

void adamStep(torch::optim::Adam& adam) {
  torch::NoGradGuard noGrad;
  // 1. Everything that allocates, before anything changes.
  std::map<std::pair<std::string, int>, std::int64_t> largest;  // (device, dtype) -> numel
  for (auto& group : adam.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    if (o.weight_decay() != 0 || o.amsgrad()) {
      adam.step();
      return;
    }
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& n = largest[{p.device().str(), static_cast<int>(p.scalar_type())}];
      n = std::max(n, p.numel());
    }
  }
  allocateAdamState(adam);  // no-op unless a parameter was added after construction
  std::map<std::pair<std::string, int>, torch::Tensor> scratch;
  for (const auto& [key, numel] : largest)
    scratch[key] = torch::empty({numel}, torch::TensorOptions()
                                             .device(torch::Device(key.first))
                                             .dtype(static_cast<torch::ScalarType>(key.second)));
  // 2. In place only: Adam::step's arithmetic, in its order.
  for (auto& group : adam.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& grad = p.grad();
      auto& st = *stateOf(adam, p);
      st.step(st.step() + 1);
      const double bc1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double bc2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      st.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
      st.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      // Laid out as the parameter (channels-last weights, RunSpec::cpuLayout), so the sqrt and the
      // update below walk every tensor in the same order.
      auto flat = scratch.at({p.device().str(), static_cast<int>(p.scalar_type())}).narrow(0, 0, p.numel());
      auto denom = p.is_non_overlapping_and_dense() ? flat.as_strided(p.sizes(), p.strides()) : flat.view(p.sizes());
      torch::sqrt_out(denom, st.exp_avg_sq());
      denom.div_(std::sqrt(bc2)).add_(o.eps());
      p.addcdiv_(st.exp_avg(), denom, -(o.lr() / bc1));
    }
  }
}

} // namespace splitseg::engine
