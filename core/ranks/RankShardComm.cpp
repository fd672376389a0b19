#include "core/ranks/RankShardComm.h"
#include "core/base/Error.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace splitseg::ranks {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using State = RankShardComm::State;

// Backward messages use tags above the forward ones so the two never meet.
constexpr int kBackwardTagOffset = 1 << 24;

struct StateHolder : torch::CustomClassHolder {
  std::shared_ptr<State> state;
};

std::shared_ptr<State> stateOf(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<StateHolder>(ctx->saved_data["state"].toCapsule())->state;
}

void saveState(AutogradContext* ctx, const std::shared_ptr<State>& state) {
  auto holder = c10::make_intrusive<StateHolder>();
  holder->state = state;
  ctx->saved_data["state"] = c10::IValue::make_capsule(holder);
}

// Sends `before`/`after` boundary pieces to the neighbours and receives theirs; returns what came
// from {previous, next} (undefined where there is no neighbour).
std::pair<torch::Tensor, torch::Tensor> swapWithNeighbours(State& s, const torch::Tensor& toPrevious,
                                                           const torch::Tensor& toNext, int tag, const char* what) {
  const int prev = s.index > 0 ? s.ranks[s.index - 1] : -1;
  const int next = s.index + 1 < static_cast<int>(s.ranks.size()) ? s.ranks[s.index + 1] : -1;
  if (prev >= 0) s.comm->send(toPrevious, prev, tag, what);
  if (next >= 0) s.comm->send(toNext, next, tag, what);
  torch::Tensor fromPrevious, fromNext;
  if (prev >= 0) fromPrevious = s.comm->recv(prev, tag, what);
  if (next >= 0) fromNext = s.comm->recv(next, tag, what);
  s.comm->flush();
  return {fromPrevious, fromNext};
}

class HaloFunction : public torch::autograd::Function<HaloFunction> {
public:
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<StateHolder> holder, const torch::Tensor& x,
                               int64_t planes) {
    State& s = *holder->state;
    const int tag = s.takeTag();
    const std::int64_t n = x.size(s.dim);
    if (n < planes) throw InvalidArgument("a slab holds " + std::to_string(n) + " planes, thinner than the halo");
    auto [prev, next] = swapWithNeighbours(s, x.narrow(s.dim, 0, planes), x.narrow(s.dim, n - planes, planes), tag,
                                           "a halo");
    auto zeros = [&] {
      auto sizes = x.sizes().vec();
      sizes[s.dim] = planes;
      return torch::zeros(sizes, x.options());
    };
    torch::Tensor before = prev.defined() ? prev.to(x.device(), x.scalar_type()) : zeros();
    torch::Tensor after = next.defined() ? next.to(x.device(), x.scalar_type()) : zeros();
    saveState(ctx, holder->state);
    ctx->saved_data["tag"] = static_cast<int64_t>(tag);
    ctx->saved_data["planes"] = planes;
    ctx->saved_data["n"] = n;
    ctx->saved_data["sizes"] = x.sizes().vec();
    return {before, after};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto state = stateOf(ctx);
    State& s = *state;
    const int tag = static_cast<int>(ctx->saved_data["tag"].toInt()) + kBackwardTagOffset;
    const auto planes = ctx->saved_data["planes"].toInt();
    const auto n = ctx->saved_data["n"].toInt();
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    auto opts = torch::TensorOptions().dtype(grads[0].defined() ? grads[0].scalar_type() : torch::kFloat).device(s.device);
    auto orZeros = [&](const torch::Tensor& g) {
      if (g.defined()) return g;
      auto sz = sizes;
      sz[s.dim] = planes;
      return torch::zeros(sz, opts);
    };
    // My halo's gradient belongs to the neighbours' boundary planes: the part from `before` goes to
    // the previous slab's last planes, from `after` to the next slab's first planes.
    auto [fromPrev, fromNext] = swapWithNeighbours(s, orZeros(grads[0]), orZeros(grads[1]), tag, "a halo gradient");
    torch::Tensor gx = torch::zeros(sizes, opts);
    if (fromPrev.defined()) gx.narrow(s.dim, 0, planes).add_(fromPrev.to(s.device, gx.scalar_type()));
    if (fromNext.defined()) gx.narrow(s.dim, n - planes, planes).add_(fromNext.to(s.device, gx.scalar_type()));
    return {torch::Tensor(), gx, torch::Tensor()};
  }
};

// Sum over the group in slab order (every rank gets bit-identical numbers): each rank sends its
// part to every other and adds all parts in the same order.
torch::Tensor sumOverGroup(State& s, const torch::Tensor& t, int tag, const char* what) {
  for (std::size_t k = 0; k < s.ranks.size(); ++k)
    if (static_cast<int>(k) != s.index) s.comm->send(t, s.ranks[k], tag, what);
  torch::Tensor sum;
  for (std::size_t k = 0; k < s.ranks.size(); ++k) {
    torch::Tensor part = static_cast<int>(k) == s.index ? t : s.comm->recv(s.ranks[k], tag, what).to(t.device(), t.scalar_type());
    sum = sum.defined() ? sum + part : part.clone();
  }
  s.comm->flush();
  return sum;
}

class SumFunction : public torch::autograd::Function<SumFunction> {
public:
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<StateHolder> holder, const torch::Tensor& t) {
    State& s = *holder->state;
    const int tag = s.takeTag();
    saveState(ctx, holder->state);
    ctx->saved_data["tag"] = static_cast<int64_t>(tag);
    return {sumOverGroup(s, t.detach(), tag, "a statistic")};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto state = stateOf(ctx);
    const int tag = static_cast<int>(ctx->saved_data["tag"].toInt()) + kBackwardTagOffset;
    // d(sum)/d(t_i) = 1 on every rank: t_i's gradient is the sum of every rank's output gradient.
    return {torch::Tensor(), sumOverGroup(*state, grads[0], tag, "a statistic's gradient")};
  }
};

} // namespace

RankShardComm::RankShardComm(Comm& comm, std::vector<int> ranks, torch::Device device, int dim, int tagBase)
    : state_(std::make_shared<State>()), ranks_(std::move(ranks)), device_(device), dim_(dim) {
  const auto at = std::find(ranks_.begin(), ranks_.end(), comm.rank());
  if (at == ranks_.end()) throw InvalidArgument("rank " + std::to_string(comm.rank()) + " holds no slab of this stage");
  index_ = static_cast<int>(at - ranks_.begin());
  state_->comm = &comm;
  state_->ranks = ranks_;
  state_->index = index_;
  state_->device = device;
  state_->dim = dim;
  state_->nextTag = tagBase;
}

std::pair<torch::Tensor, torch::Tensor> RankShardComm::exchangeHalo(const torch::Tensor& x, std::int64_t planes) {
  auto holder = c10::make_intrusive<StateHolder>();
  holder->state = state_;
  auto out = HaloFunction::apply(holder, x, planes);
  return {out[0], out[1]};
}

torch::Tensor RankShardComm::allReduceSum(const torch::Tensor& t) {
  auto holder = c10::make_intrusive<StateHolder>();
  holder->state = state_;
  return SumFunction::apply(holder, t)[0];
}

torch::Tensor RankShardComm::local(const torch::Tensor& p) {
  // Each rank holds its own replica of the stage's parameters, on its own device.
  return p.defined() && p.device() != device_ ? p.to(device_) : p;
}

} // namespace splitseg::ranks
