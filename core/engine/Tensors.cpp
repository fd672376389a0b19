#include "core/engine/Tensors.h"
#include "core/base/Error.h"

#include <torch/torch.h>

namespace splitseg::engine {

torch::Tensor toTensor(const Volume& v) {
  const auto& s = v.size();
  return torch::from_blob(const_cast<float*>(v.data()), {s[2], s[1], s[0]}, torch::kFloat).clone();
}

torch::Tensor toTensor(const std::vector<Volume>& channels) {
  if (channels.empty()) throw InvalidArgument("no input channels");
  std::vector<torch::Tensor> t;
  for (const auto& c : channels) {
    if (c.size() != channels.front().size()) throw InvalidArgument("input channels differ in size");
    t.push_back(toTensor(c));
  }
  return torch::stack(t);
}

Volume toVolume(const torch::Tensor& dhw, const Geometry& geometry) {
  auto t = dhw.detach().to(torch::kCPU, torch::kFloat).contiguous();
  if (t.dim() != 3 || t.size(0) != geometry.size[2] || t.size(1) != geometry.size[1] ||
      t.size(2) != geometry.size[0])
    throw InvalidArgument("tensor shape does not match the volume geometry");
  Volume v(geometry);
  std::memcpy(v.data(), t.data_ptr<float>(), sizeof(float) * static_cast<std::size_t>(t.numel()));
  return v;
}

} // namespace splitseg::engine
