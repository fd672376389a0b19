#include "core/shard/HaloConv3d.h"
#include "core/base/Error.h"
#include "core/shard/ShardComm.h"

#include <ATen/ATen.h>

#include <variant>

namespace splitseg::shard {

namespace {
std::vector<std::int64_t> vec(const torch::ExpandingArray<3>& a) { return {a->begin(), a->end()}; }
} // namespace

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
  const torch::Tensor w = comm->local(weight);
  const torch::Tensor b = bias.defined() ? comm->local(bias) : torch::Tensor();
  const auto stride = vec(options.stride()), dilation = vec(options.dilation());
  const auto groups = options.groups();
  if (halo == 0) return at::conv3d(input, w, b, stride, padding, dilation, groups);
  padding[axis] = 0;  // the halo takes the padding's place; at the volume's borders it is zeros
  const int dim = comm->dim();
  const std::int64_t n = input.size(dim);
  const auto [before, after] = comm->exchangeHalo(input, halo);
  if (n < 2 * halo) return at::conv3d(torch::cat({before, input, after}, dim), w, b, stride, padding, dilation, groups);
  // The interior planes straight from the slab (the tensor autograd keeps anyway: no padded copy
  // of the whole slab is made or saved), the boundary planes from thin pieces with the halo.
  const torch::Tensor low = at::conv3d(torch::cat({before, input.narrow(dim, 0, 2 * halo)}, dim), w, b, stride, padding,
                                       dilation, groups);
  const torch::Tensor high = at::conv3d(torch::cat({input.narrow(dim, n - 2 * halo, 2 * halo), after}, dim), w, b, stride,
                                        padding, dilation, groups);
  if (n == 2 * halo) return torch::cat({low, high}, dim);
  const torch::Tensor interior = at::conv3d(input, w, b, stride, padding, dilation, groups);
  return torch::cat({low, interior, high}, dim);
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
