#include "core/engine/StageCheckpoint.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/Context.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <set>

namespace splitseg::engine {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// RNG states of the CPU generator and of each CUDA device the stage touches.
struct RngSnapshot {
  std::vector<std::pair<c10::Device, at::Tensor>> states;

  static RngSnapshot take(const std::set<c10::DeviceIndex>& cudaDevices) {
    RngSnapshot s;
    s.capture(c10::Device(c10::kCPU));
    for (auto idx : cudaDevices) s.capture(c10::Device(c10::kCUDA, idx));
    return s;
  }
  void restore() const {
    for (const auto& [device, state] : states) {
      auto gen = at::globalContext().defaultGenerator(device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
    }
  }

private:
  void capture(c10::Device device) {
    auto gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.emplace_back(device, gen.get_state());
  }
};

// Autocast settings of the forward, re-applied for the recomputation: backward runs on the
// autograd engine's threads, where autocast is off.
struct AutocastState {
  bool cpu = false, cuda = false;
  at::ScalarType cpuType = at::kBFloat16, cudaType = at::kHalf;
  static AutocastState current() {
    AutocastState s;
    s.cpu = at::autocast::is_autocast_enabled(at::kCPU);
    s.cuda = at::autocast::is_autocast_enabled(at::kCUDA);
    s.cpuType = at::autocast::get_autocast_dtype(at::kCPU);
    s.cudaType = at::autocast::get_autocast_dtype(at::kCUDA);
    return s;
  }
  void apply() const {
    at::autocast::set_autocast_enabled(at::kCPU, cpu);
    at::autocast::set_autocast_enabled(at::kCUDA, cuda);
    at::autocast::set_autocast_dtype(at::kCPU, cpuType);
    at::autocast::set_autocast_dtype(at::kCUDA, cudaType);
  }
};

struct AutocastScope {
  explicit AutocastScope(const AutocastState& s) : saved_(AutocastState::current()) {
    s.apply();
    if (s.cpu || s.cuda) at::autocast::increment_nesting();
    active_ = s.cpu || s.cuda;
  }
  ~AutocastScope() {
    // Leaving the outermost autocast region drops its cache of casted weights.
    if (active_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    saved_.apply();
  }
  AutocastState saved_;
  bool active_ = false;
};

struct CheckpointState : torch::CustomClassHolder {
  MultiStageFunction stage;
  RngSnapshot rng;
  AutocastState autocast;
  std::size_t numInputs = 0;
  std::vector<bool> inputRequiresGrad;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
public:
  // Inputs and parameters come as TensorList: custom_function only treats tensors, optional
  // tensors and TensorList arguments as graph inputs (a std::vector would be ignored).
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointState> state,
                               at::TensorList inputsList, at::TensorList params) {
    const variable_list inputs = inputsList.vec();
    std::set<c10::DeviceIndex> cuda;
    for (const auto& t : inputs)
      if (t.is_cuda()) cuda.insert(t.device().index());
    state->rng = RngSnapshot::take(cuda);
    state->autocast = AutocastState::current();
    state->numInputs = inputs.size();
    for (const auto& t : inputs) state->inputRequiresGrad.push_back(t.requires_grad());
    variable_list out;
    {
      torch::NoGradGuard noGrad;
      out = state->stage(inputs);
    }
    ctx->save_for_backward(inputs);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    // Parameters are leaves the stage reaches by itself; keeping handles costs no memory.
    ctx->saved_data["params"] = params.vec();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list gradOutputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    // Parameters are not saved: they are leaves and the stage function reaches them itself.
    variable_list inputs;
    variable_list wrt;
    for (std::size_t i = 0; i < saved.size(); ++i) {
      auto x = saved[i].detach().requires_grad_(state->inputRequiresGrad[i]);
      inputs.push_back(x);
      if (state->inputRequiresGrad[i]) wrt.push_back(x);
    }
    const variable_list paramEdges = ctx->saved_data["params"].toTensorVector();
    for (const auto& p : paramEdges) wrt.push_back(p);

    variable_list out;
    {
      // The recomputation consumes random numbers exactly as the forward did; the generators
      // are put back afterwards so the rest of training sees an unchanged sequence.
      std::set<c10::DeviceIndex> cuda;
      for (const auto& [device, st] : state->rng.states)
        if (device.is_cuda()) cuda.insert(device.index());
      const RngSnapshot now = RngSnapshot::take(cuda);
      state->rng.restore();
      torch::AutoGradMode enable(true);
      AutocastScope autocast(state->autocast);
      out = state->stage(inputs);
      now.restore();
    }
    // Outputs nothing downstream used get no gradient; leave them out.
    variable_list outs, gradOuts;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (i < gradOutputs.size() && gradOutputs[i].defined() && out[i].requires_grad()) {
        outs.push_back(out[i]);
        gradOuts.push_back(gradOutputs[i]);
      }
    variable_list grads(wrt.size());
    if (!wrt.empty() && !outs.empty())
      grads = torch::autograd::grad(outs, wrt, gradOuts, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    // One result per forward argument: the state (none), then inputs, then parameters.
    variable_list result;
    result.emplace_back();
    std::size_t g = 0;
    for (std::size_t i = 0; i < saved.size(); ++i)
      result.push_back(state->inputRequiresGrad[i] ? grads[g++] : torch::Tensor());
    for (std::size_t i = 0; i < paramEdges.size(); ++i) result.push_back(grads[g++]);
    return result;
  }

};

} // namespace

std::vector<torch::Tensor> runCheckpointedMulti(MultiStageFunction stage, const std::vector<torch::Tensor>& inputs,
                                                const std::vector<torch::Tensor>& params) {
  if (!torch::GradMode::is_enabled()) return stage(inputs);
  auto state = c10::make_intrusive<CheckpointState>();
  state->stage = std::move(stage);
  variable_list trainable;
  for (const auto& p : params)
    if (p.defined() && p.requires_grad()) trainable.push_back(p);
  return CheckpointFunction::apply(state, at::TensorList(inputs), at::TensorList(trainable));
}

torch::Tensor runCheckpointed(StageFunction stage, const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& params) {
  auto multi = [stage = std::move(stage)](const std::vector<torch::Tensor>& in) {
    return std::vector<torch::Tensor>{stage(in)};
  };
  return runCheckpointedMulti(multi, inputs, params).at(0);
}

} // namespace splitseg::engine
