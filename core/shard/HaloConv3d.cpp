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
  bool oneDnn = false;         // call oneDNN directly (see useOneDnn)
};

// oneDNN's convolution backward as LibTorch registers it (aten/src/ATen/native/mkldnn/Conv.cpp,
// REGISTER_ALL_CPU_DISPATCH: the same function for every CPU capability, so DEFAULT is it). Reached
// through the stub's exported pointer because at::convolution_backward would apply the heuristic
// above again; null when a build has no oneDNN, and the slab then keeps LibTorch's choice.
at::native::mkldnn_convolution_backward_fn oneDnnBackward() {
  return at::native::mkldnn_convolution_backward_stub_DECLARE_DISPATCH_type::DEFAULT;
}

// LibTorch sends a CPU fp32 convolution at batch 1 to oneDNN only when N*C*D*H > 20480 ("for some
// case, native is faster": use_mkldnn in aten/src/ATen/native/Convolution.cpp, torch 2.11), else
// to its vol2col kernel. Cutting D or H divides that product by the number of slabs, so a slab
// would fall to vol2col where the unsharded layer runs oneDNN: 2-13x slower per convolution at 1
// thread for this network's shapes (measured here, torch 2.11, 16-128 channels). A slab therefore
// runs the kernel the unsharded layer would; the unsharded extent is taken as count x this slab's.
bool useOneDnn(at::IntArrayRef sizes, const torch::Tensor& x, const torch::Tensor& w, int dim, int count) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || !at::globalContext().userEnabledMkldnn() ||
      sizes[0] != 1 || (w.size(-1) > 3 && w.size(-2) > 3) || dim > 3 || !oneDnnBackward())
    return false;
  const std::int64_t slab = sizes[0] * sizes[1] * sizes[2] * sizes[3];
  return slab <= 20480 && slab * count > 20480;
}

torch::Tensor convolve(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const ConvArgs& a) {
  if (a.oneDnn)
    return at::mkldnn_convolution(x.contiguous(), w.contiguous(), b.defined() ? std::optional<torch::Tensor>(b) : std::nullopt,
                                  a.padding, a.stride, a.dilation, a.groups);
  return at::convolution(x, w, b, a.stride, a.padding, a.dilation, false, {0, 0, 0}, a.groups);
}

// A convolution of cat({before, x, after}) along the cut axis whose padded input exists only while a
// kernel runs: autograd keeps x (which the layer before saves anyway) and the thin halos, not a
// padded copy of the slab, and the slab is convolved in one call (three calls on the interior and
// two thin boundary pieces cost zero-filled gradients, their sums and an output copy per layer).
class PaddedConv : public torch::autograd::Function<PaddedConv> {
public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& before, const torch::Tensor& x,
                               const torch::Tensor& after, const torch::Tensor& w, const torch::Tensor& b, ConvArgs a) {
    torch::Tensor out = convolve(torch::cat({before, x, after}, a.dim), w, b, a);
    ctx->save_for_backward({before, x, after, w});
    ctx->saved_data["bias"] = b.defined();
    ctx->saved_data["stride"] = a.stride;
    ctx->saved_data["padding"] = a.padding;
    ctx->saved_data["dilation"] = a.dilation;
    ctx->saved_data["groups"] = a.groups;
    ctx->saved_data["dim"] = static_cast<std::int64_t>(a.dim);
    ctx->saved_data["onednn"] = a.oneDnn;
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
    const bool bias = ctx->saved_data["bias"].toBool();
    const torch::Tensor& w = saved[3];
    const torch::Tensor padded = torch::cat({saved[0], saved[1], saved[2]}, a.dim);
    const std::array<bool, 3> mask{ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2),
                                   ctx->needs_input_grad(3), bias && ctx->needs_input_grad(4)};
    torch::Tensor gi, gw, gb;
    const torch::Tensor grad = grads[0].contiguous();
    if (ctx->saved_data["onednn"].toBool())
      std::tie(gi, gw, gb) =
          oneDnnBackward()(padded, grad, w.contiguous(), a.padding, a.stride, a.dilation, a.groups, mask);
    else
      std::tie(gi, gw, gb) = at::convolution_backward(grad, padded, w, bias ? std::optional<at::IntArrayRef>(
                                                                                   at::IntArrayRef{w.size(0)})
                                                                             : std::nullopt,
                                                      a.stride, a.padding, a.dilation, false, {0, 0, 0}, a.groups, mask);
    const std::int64_t lo = saved[0].size(a.dim), n = saved[1].size(a.dim), hi = saved[2].size(a.dim);
    torch::Tensor gBefore, gX, gAfter;
    if (gi.defined()) {
      gBefore = gi.narrow(a.dim, 0, lo);
      gX = gi.narrow(a.dim, lo, n);
      gAfter = gi.narrow(a.dim, lo + n, hi);
    }
    return {gBefore, gX, gAfter, gw, gb, torch::Tensor()};
  }
};

} // namespace

bool slabUsesOneDnn(const torch::Tensor& slab, const torch::Tensor& weight, int dim, int count) {
  return useOneDnn(slab.sizes(), slab, weight, dim, count);
}

torch::Tensor HaloConv3dImpl::forward(const torch::Tensor& input) {
  ShardComm* comm = current();
  if (!comm) return torch::nn::Conv3dImpl::forward(input);
  const auto* pad = std::get_if<torch::ExpandingArray<3>>(&options.padding());
  if (!pad || !std::holds_alternative<torch::enumtype::kZeros>(options.padding_mode()))
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
  ConvArgs a;
  a.stride = vec(options.stride());
  a.dilation = vec(options.dilation());
  a.groups = options.groups();
  a.dim = comm->dim();
  padding[axis] = 0;  // the halo takes the padding's place; at the volume's borders it is zeros
  auto padded = x.sizes().vec();
  padded[a.dim] += 2 * halo;
  a.oneDnn = useOneDnn(padded, x, w, a.dim, comm->count());
  a.padding = padding;
  const auto [before, after] = comm->exchangeHalo(x, halo);
  return PaddedConv::apply(before, x, after, w, b, a)[0];
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
