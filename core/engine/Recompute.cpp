#include "core/engine/Recompute.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/Context.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>

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
  std::shared_ptr<OffloadChain> offload;  // null: inputs saved on their devices
  std::size_t offloadIndex = 0;
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
    if (state->offload)
      state->offloadIndex = state->offload->stash(inputs);
    else
      ctx->save_for_backward(inputs);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    // Parameters are leaves the stage reaches by itself; keeping handles costs no memory.
    ctx->saved_data["params"] = params.vec();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list gradOutputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const variable_list saved =
        state->offload ? state->offload->fetch(state->offloadIndex) : ctx->get_saved_variables();
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
    // Outputs nothing downstream used get no gradient; leave them out. The graph is entered by
    // its edges rather than through torch::autograd::grad's output tensors, so the recomputed
    // outputs can be let go first: their storage then lives only as long as the graph saves it
    // (a final in-place ReLU's result until its backward), not through this whole backward.
    torch::autograd::edge_list roots;
    variable_list gradOuts;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (i < gradOutputs.size() && gradOutputs[i].defined() && out[i].requires_grad()) {
        roots.push_back(torch::autograd::impl::gradient_edge(out[i]));
        gradOuts.push_back(gradOutputs[i]);
      }
    out.clear();
    variable_list grads(wrt.size());
    if (!wrt.empty() && !roots.empty()) {
      torch::autograd::edge_list wrtEdges;
      for (const auto& t : wrt) wrtEdges.push_back(torch::autograd::impl::gradient_edge(t));
      grads = torch::autograd::Engine::get_default_engine().execute(roots, gradOuts, /*keep_graph=*/false,
                                                                    /*create_graph=*/false,
                                                                    /*accumulate_grad=*/false, wrtEdges);
    }
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

std::vector<torch::Tensor> runRecomputedMulti(MultiStageFunction stage, const std::vector<torch::Tensor>& inputs,
                                                const std::vector<torch::Tensor>& params,
                                                const std::shared_ptr<OffloadChain>& offload) {
  if (!torch::GradMode::is_enabled()) return stage(inputs);
  auto state = c10::make_intrusive<CheckpointState>();
  state->stage = std::move(stage);
  state->offload = offload;
  variable_list trainable;
  for (const auto& p : params)
    if (p.defined() && p.requires_grad()) trainable.push_back(p);
  return CheckpointFunction::apply(state, at::TensorList(inputs), at::TensorList(trainable));
}

torch::Tensor runRecomputed(StageFunction stage, const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& params, const std::shared_ptr<OffloadChain>& offload) {
  auto multi = [stage = std::move(stage)](const std::vector<torch::Tensor>& in) {
    return std::vector<torch::Tensor>{stage(in)};
  };
  return runRecomputedMulti(multi, inputs, params, offload).at(0);
}

// ---- host offload ----

struct OffloadChain::Entry {
  struct Item {
    at::Tensor host;                      // the host copy (or the tensor itself when not copied)
    c10::Device device{c10::kCPU};
    bool copied = false;
    std::unique_ptr<c10::Event> onHost;   // CUDA: the copy to the host is done
    at::Tensor back;                      // on its device again
    std::unique_ptr<c10::Event> backDone; // CUDA: the copy back is done
  };
  std::vector<Item> items;
  bool started = false;
};

OffloadChain::OffloadChain() = default;
OffloadChain::OffloadChain(Options options) : options_(options) {}
OffloadChain::~OffloadChain() = default;

std::size_t OffloadChain::stash(const std::vector<torch::Tensor>& inputs) {
  auto e = std::make_unique<Entry>();
  for (const auto& t : inputs) {
    Entry::Item it;
    if (t.defined()) it.device = t.device();
    if (t.defined() && t.is_cuda()) {
      // Pinned, so the copy is asynchronous; it runs on the stream that produced the tensor, so
      // the allocator cannot hand the tensor's memory out again before the copy has read it.
      const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      it.host = at::empty(t.sizes(), at::TensorOptions().dtype(t.dtype()).device(c10::kCPU).pinned_memory(true));
      it.host.copy_(t, /*non_blocking=*/true);
      it.onHost = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
      it.onHost->record(impl->getStream(t.device()));
      it.copied = true;
    } else if (t.defined() && options_.copyCpuTensors) {
      it.host = t.detach().clone();
      it.copied = true;
    } else {
      it.host = t.defined() ? t.detach() : t;
    }
    e->items.push_back(std::move(it));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& it : e->items) toHost_ += it.copied ? 1 : 0;
  entries_.push_back(std::move(e));
  return entries_.size() - 1;
}

void OffloadChain::startCopyBack(Entry& e) {
  e.started = true;
  for (auto& it : e.items) {
    if (!it.copied) {
      it.back = it.host;
      continue;
    }
    ++back_;
    if (it.device.is_cuda()) {
      // On a side stream, after the copy out finished, so it can overlap the compute stream's work.
      const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      const c10::Stream copy = impl->getStreamFromGlobalPool(it.device, /*isHighPriority=*/false);
      it.onHost->block(copy);
      {
        c10::StreamGuard guard(copy);
        it.back = it.host.to(it.device, /*non_blocking=*/true);
      }
      it.backDone = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
      it.backDone->record(copy);
    } else {
      it.back = it.host;  // already a separate copy (Options::copyCpuTensors)
    }
    it.host = at::Tensor();  // the host copy goes once the copy back no longer reads it
  }
}

std::vector<torch::Tensor> OffloadChain::fetch(std::size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (i >= entries_.size() || !entries_[i]) throw std::logic_error("OffloadChain: entry fetched twice or never stashed");
  Entry& e = *entries_[i];
  if (e.started) ++prefetched_;
  else startCopyBack(e);
  std::vector<torch::Tensor> out;
  for (auto& it : e.items) {
    if (it.backDone) {
      // The compute stream waits for the copy, and the allocator keeps the memory until the
      // compute stream is done with it (it was allocated on the copy stream).
      const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      const c10::Stream current = impl->getStream(it.device);
      it.backDone->block(current);
      it.back.record_stream(current);
    }
    out.push_back(it.back);
  }
  entries_[i].reset();
  // The stage whose backward comes next ran just before this one in forward.
  if (i > 0 && entries_[i - 1] && !entries_[i - 1]->started) startCopyBack(*entries_[i - 1]);
  return out;
}

std::int64_t OffloadChain::hostBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::int64_t n = 0;
  for (const auto& e : entries_)
    if (e)
      for (const auto& it : e->items)
        if (it.copied && it.host.defined()) n += static_cast<std::int64_t>(it.host.nbytes());
  return n;
}

int OffloadChain::copiesToHost() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return toHost_;
}

int OffloadChain::copiesBack() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return back_;
}

int OffloadChain::prefetches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return prefetched_;
}

} // namespace splitseg::engine
