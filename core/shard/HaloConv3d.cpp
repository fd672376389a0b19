#include "core/shard/HaloConv3d.h"
#include "core/base/Error.h"
#include "core/shard/ShardComm.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/native/ConvUtils.h>
#include <torch/csrc/autograd/custom_function.h>

#include <variant>

namespace splitseg::shard {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<std::int64_t> vec(const torch::ExpandingArray<3>& a) { return {a->begin(), a->end()}; }

struct ConvArgs {
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
  int dim = 2;                 // the cut axis
  std::int64_t halo = 1;       // planes taken from each neighbour
  bool oneDnn = false;         // call oneDNN directly (see callsOneDnn)
  bool previous = false, next = false;  // whether there is a neighbour before / after this slab
};

// The layer's own arguments; the caller sets the cut, the halo and the kernel choice.
ConvArgs argsOf(const torch::nn::detail::ConvNdOptions<3>& o, std::vector<std::int64_t> padding) {
  ConvArgs a;
  a.stride = vec(o.stride());
  a.dilation = vec(o.dilation());
  a.groups = o.groups();
  a.padding = std::move(padding);
  return a;
}

// Autograd wants defined tensor arguments: an absent halo or bias travels as an empty tensor.
torch::Tensor orEmpty(const torch::Tensor& t, const torch::Tensor& like) { return t.defined() ? t : like.new_empty({0}); }

// oneDNN's convolution backward as LibTorch registers it (aten/src/ATen/native/mkldnn/Conv.cpp,
// REGISTER_ALL_CPU_DISPATCH: the same function for every CPU capability, so DEFAULT is it). Reached
// through the stub's exported pointer because at::convolution_backward would apply the heuristic
// above again; null when a build has no oneDNN, and the slab then keeps LibTorch's choice.
at::native::mkldnn_convolution_backward_fn oneDnnBackward() {
  return at::native::mkldnn_convolution_backward_stub_DECLARE_DISPATCH_type::DEFAULT;
}

thread_local std::int64_t tWholeBatch = 0;
thread_local bool tOneDnnInference = false;

// LibTorch sends a CPU fp32 convolution at batch 1 to oneDNN only when N*C*D*H > 20480 ("for some
// case, native is faster": use_mkldnn in aten/src/ATen/native/Convolution.cpp, torch 2.11), else
// to its vol2col kernel, which is 2-13x slower per convolution at 1 thread for this network's
// shapes (measured here, torch 2.11, 16-128 channels). That test splits one computation over two
// kernels: cutting D or H divides the product by the number of slabs, and a micro-batch of one
// sample divides it by the batch, so a slab or a micro-batch would fall to vol2col where the whole
// runs oneDNN (GPipe's micro-batches ran 1.2x slower per sample than their batch). They run the
// whole's kernel instead. LibTorch's other conditions (the "a" of use_mkldnn) hold for the whole
// as for the part, except that a 1x1x1 kernel at stride 1 on one thread stays native for both.
// False where LibTorch picks oneDNN itself, in a build without oneDNN, and for non-contiguous
// layouts, except channels-last without gradients (the CPU inference layout, which oneDNN takes
// as it is; LibTorch's test sends it to vol2col the same way).
} // namespace

namespace {
bool oneDnnLayout(const torch::Tensor& t) {
  return t.is_contiguous() || (!torch::GradMode::is_enabled() && t.is_contiguous(at::MemoryFormat::ChannelsLast3d));
}
} // namespace

bool callsOneDnn(const torch::Tensor& x, const torch::Tensor& w, std::int64_t wholeFactor) {
  // Inference (OneDnnInferenceScope, no gradients): every such convolution, as if in a large batch.
  if (tOneDnnInference && !torch::GradMode::is_enabled()) wholeFactor = std::max<std::int64_t>(wholeFactor, 1 << 20);
  if (wholeFactor <= 1 || !x.device().is_cpu() || x.scalar_type() != torch::kFloat ||
      w.scalar_type() != torch::kFloat || !at::globalContext().userEnabledMkldnn() || x.dim() != 5 ||
      x.size(0) != 1 || !oneDnnLayout(x) || !oneDnnLayout(w) || (w.size(-1) > 3 && w.size(-2) > 3) ||
      !oneDnnBackward())
    return false;
  const bool pointwise = w.size(-1) == 1 && w.size(-2) == 1 && w.size(-3) == 1;
  if (pointwise && at::get_num_threads() == 1) return false;  // use_mkldnn's "a" (stride 1 here)
  const std::int64_t part = x.size(1) * x.size(2) * x.size(3);
  return part <= 20480 && part * wholeFactor > 20480;
}

namespace {

torch::Tensor convolve(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const ConvArgs& a) {
  if (a.oneDnn) {
    // Channels-last weights (CPU inference) keep their layout: no copy of them per call.
    const auto layout = w.is_contiguous(at::MemoryFormat::ChannelsLast3d) && !w.is_contiguous()
                            ? at::MemoryFormat::ChannelsLast3d
                            : at::MemoryFormat::Contiguous;
    return at::mkldnn_convolution(x.contiguous(layout), w.contiguous(layout),
                                  b.defined() ? std::optional<torch::Tensor>(b) : std::nullopt, a.padding, a.stride,
                                  a.dilation, a.groups);
  }
  return at::convolution(x, w, b, a.stride, a.padding, a.dilation, false, {0, 0, 0}, a.groups);
}

// What a neighbour's halo adds to the `halo` output planes beside it: output plane i next to the
// previous slab gets sum_t w[t] * before[i + t] over the taps t that reach into the halo (t < halo - i),
// next to the next slab sum_t w[t] * after[i + t - 2 halo] (t >= 2 halo - i). Both are convolutions of
// the halo (and halo - 1 planes of zeros, none for a 3x3x3 kernel) with `halo` taps of the kernel.
struct Edge {
  torch::Tensor input;   // halo and zeros
  std::int64_t firstTap;  // of the kernel along the cut axis
  std::int64_t haloAt;    // where the halo sits in `input`
};

Edge edgeOf(const torch::Tensor& halo, bool low, const ConvArgs& a) {
  if (a.halo == 1) return {halo, low ? 0 : a.halo + 1, 0};
  auto sizes = halo.sizes().vec();
  sizes[a.dim] = a.halo - 1;
  const torch::Tensor zeros = torch::zeros(sizes, halo.options());
  if (low) return {torch::cat({halo, zeros}, a.dim), 0, 0};
  return {torch::cat({zeros, halo}, a.dim), a.halo + 1, a.halo - 1};
}

std::vector<std::int64_t> edgePadding(const ConvArgs& a) {
  auto p = a.padding;
  p[a.dim - 2] = 0;
  return p;
}

torch::Tensor edgeConv(const torch::Tensor& halo, bool low, const torch::Tensor& w, const ConvArgs& a) {
  const Edge e = edgeOf(halo, low, a);
  return at::convolution(e.input, w.narrow(a.dim, e.firstTap, a.halo), {}, a.stride, edgePadding(a), a.dilation, false,
                         {0, 0, 0}, a.groups);
}

// A slab's convolution as the unsharded layer computes it on those planes, by linearity: the
// slab convolved with zero padding (one call, the layer's own kernel and memory: no padded copy
// of the slab exists at any time), plus the thin convolutions of the neighbours' halos added to
// the planes beside them. Autograd keeps the slab (which the layer before saves anyway) and the
// halos. Earlier versions convolved cat(halo, slab, halo): a slab-sized copy in forward and in
// backward, which the planner now would have to hold free on every device.
class HaloConv : public torch::autograd::Function<HaloConv> {
public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& before, const torch::Tensor& x,
                               const torch::Tensor& after, const torch::Tensor& w, const torch::Tensor& b, ConvArgs a) {
    // A layer without bias passes an empty tensor (autograd wants defined arguments).
    const torch::Tensor bias = b.numel() > 0 ? b : torch::Tensor();
    torch::Tensor out = convolve(x, w, bias, a);
    const std::int64_t n = out.size(a.dim);
    if (a.previous) out.narrow(a.dim, 0, a.halo).add_(edgeConv(before, true, w, a));
    if (a.next) out.narrow(a.dim, n - a.halo, a.halo).add_(edgeConv(after, false, w, a));
    ctx->save_for_backward({before, x, after, w});
    ctx->saved_data["bias"] = bias.defined();
    ctx->saved_data["stride"] = a.stride;
    ctx->saved_data["padding"] = a.padding;
    ctx->saved_data["dilation"] = a.dilation;
    ctx->saved_data["groups"] = a.groups;
    ctx->saved_data["dim"] = static_cast<std::int64_t>(a.dim);
    ctx->saved_data["halo"] = a.halo;
    ctx->saved_data["onednn"] = a.oneDnn;
    ctx->saved_data["previous"] = a.previous;
    ctx->saved_data["next"] = a.next;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    ConvArgs a;
    a.stride = ctx->saved_data["stride"].toIntVector();
    a.padding = ctx->saved_data["padding"].toIntVector();
    a.dilation = ctx->saved_data["dilation"].toIntVector();
    a.groups = ctx->saved_data["groups"].toInt();
    a.dim = static_cast<int>(ctx->saved_data["dim"].toInt());
    a.halo = ctx->saved_data["halo"].toInt();
    a.previous = ctx->saved_data["previous"].toBool();
    a.next = ctx->saved_data["next"].toBool();
    const bool bias = ctx->saved_data["bias"].toBool();
    const torch::Tensor& w = saved[3];
    const torch::Tensor grad = grads[0].contiguous();
    const std::array<bool, 3> mask{ctx->needs_input_grad(1), ctx->needs_input_grad(3), bias && ctx->needs_input_grad(4)};
    torch::Tensor gx, gw, gb;
    if (ctx->saved_data["onednn"].toBool()) {
      std::tie(gx, gw, gb) = oneDnnBackward()(saved[1].contiguous(), grad, w.contiguous(), a.padding, a.stride,
                                              a.dilation, a.groups, mask);
    } else {
      const std::vector<std::int64_t> biasSizes{w.size(0)};
      std::tie(gx, gw, gb) = at::convolution_backward(grad, saved[1], w, bias ? std::optional<at::IntArrayRef>(biasSizes)
                                                                              : std::nullopt,
                                                      a.stride, a.padding, a.dilation, false, {0, 0, 0}, a.groups, mask);
    }
    const std::int64_t n = grad.size(a.dim);
    // The halos' gradients (sent back to their owners) and their share of the weight's.
    auto edge = [&](int index, bool low) -> torch::Tensor {
      const bool wantHalo = ctx->needs_input_grad(index);
      if (!wantHalo && !mask[1]) return {};
      const torch::Tensor g = grad.narrow(a.dim, low ? 0 : n - a.halo, a.halo).contiguous();
      const Edge e = edgeOf(saved[static_cast<std::size_t>(index)], low, a);
      const torch::Tensor taps = w.narrow(a.dim, e.firstTap, a.halo);
      auto [gi, gwe, unused] = at::convolution_backward(g, e.input, taps, std::nullopt, a.stride, edgePadding(a),
                                                        a.dilation, false, {0, 0, 0}, a.groups, {wantHalo, mask[1], false});
      if (mask[1]) gw.narrow(a.dim, e.firstTap, a.halo).add_(gwe);
      return wantHalo ? gi.narrow(a.dim, e.haloAt, a.halo) : torch::Tensor();
    };
    const torch::Tensor gBefore = a.previous ? edge(0, true) : torch::Tensor();
    const torch::Tensor gAfter = a.next ? edge(2, false) : torch::Tensor();
    return {gBefore, gx, gAfter, gw, gb, torch::Tensor()};
  }
};

} // namespace

OneDnnInferenceScope::OneDnnInferenceScope() : previous_(tOneDnnInference) { tOneDnnInference = true; }
OneDnnInferenceScope::~OneDnnInferenceScope() { tOneDnnInference = previous_; }

WholeBatchScope::WholeBatchScope(std::int64_t batch) : previous_(tWholeBatch) { tWholeBatch = batch; }
WholeBatchScope::~WholeBatchScope() { tWholeBatch = previous_; }

torch::Tensor HaloConv3dImpl::forward(const torch::Tensor& input) {
  ShardComm* comm = current();
  const auto* pad = std::get_if<torch::ExpandingArray<3>>(&options.padding());
  const bool zeros = std::holds_alternative<torch::enumtype::kZeros>(options.padding_mode());
  if (!comm) {
    // Under bf16 autocast the convolution runs in bf16 (oneDNN already): LibTorch's path casts.
    if (!pad || !zeros || at::autocast::is_autocast_enabled(input.device().type()) ||
        !callsOneDnn(input, weight, tWholeBatch))
      return torch::nn::Conv3dImpl::forward(input);
    ConvArgs a = argsOf(options, vec(*pad));
    a.halo = 0;
    a.oneDnn = true;
    if (!torch::GradMode::is_enabled() || (!input.requires_grad() && !weight.requires_grad()))
      return convolve(input, weight, bias, a);
    // No neighbours: the halo arguments are never read.
    return HaloConv::apply(orEmpty({}, input), input, orEmpty({}, input), weight, orEmpty(bias, input), a)[0];
  }
  if (!pad || !zeros)
    throw InvalidArgument("a sharded stage holds a convolution with 'same'/'valid' or non-zero padding, which sharding does not handle");
  const int axis = comm->dim() - 2;
  const std::int64_t k = (*options.kernel_size())[axis];
  std::vector<std::int64_t> padding = vec(*pad);
  if ((*options.stride())[axis] != 1 || (*options.dilation())[axis] != 1 || k % 2 == 0 || padding[axis] != (k - 1) / 2)
    throw InvalidArgument("a sharded stage holds a convolution that is not 'same'-sized along the cut axis (kernel " +
                          std::to_string(k) + ", stride " + std::to_string((*options.stride())[axis]) + ", padding " +
                          std::to_string(padding[axis]) + "); sharding handles odd kernels with stride 1 and padding (k-1)/2");
  const std::int64_t halo = (k - 1) / 2;
  torch::Tensor x = input, w = comm->local(weight), b = bias.defined() ? comm->local(bias) : torch::Tensor();
  if (halo == 0) return at::conv3d(x, w, b, vec(options.stride()), padding, vec(options.dilation()), options.groups());
  // The custom function below is below autocast's reach (it lists conv3d, not what runs inside), so
  // cast as autocast would, before the exchange: halos travel in the precision they are used in.
  const auto type = x.device().type();
  if (at::autocast::is_autocast_enabled(type)) {
    const auto dtype = at::autocast::get_autocast_dtype(type);
    x = x.to(dtype);
    w = w.to(dtype);
    if (b.defined()) b = b.to(dtype);
  }
  ConvArgs a = argsOf(options, padding);  // zero padding along the cut too: the halos' share is added afterwards
  a.dim = comm->dim();
  a.halo = halo;
  a.previous = comm->index() > 0;
  a.next = comm->index() + 1 < comm->count();
  a.oneDnn = callsOneDnn(x, w, std::max<std::int64_t>(tWholeBatch, 1) * (a.dim <= 3 ? comm->count() : 1));
  const auto [before, after] = comm->exchangeHalo(x, halo);
  return HaloConv::apply(before, x, after, w, orEmpty(b, x), a)[0];
}

torch::Tensor ShardConvTranspose3dImpl::forward(const torch::Tensor& input) {
  ShardComm* comm = current();
  if (!comm) return torch::nn::ConvTranspose3dImpl::forward(input);
  const auto* pad = std::get_if<torch::ExpandingArray<3>>(&options.padding());
  const int axis = comm->dim() - 2;
  if (!pad || (**pad)[axis] != 0 || (*options.kernel_size())[axis] != (*options.stride())[axis] ||
      (*options.output_padding())[axis] != 0 || (*options.dilation())[axis] != 1)
    throw InvalidArgument("a sharded stage holds a transposed convolution whose windows overlap along the cut axis; "
                          "sharding handles kernel = stride without padding");
  const torch::Tensor b = bias.defined() ? comm->local(bias) : torch::Tensor();
  return at::conv_transpose3d(input, comm->local(weight), b, vec(options.stride()), vec(*pad),
                              vec(options.output_padding()), options.groups(), vec(options.dilation()));
}

} // namespace splitseg::shard
