#include "core/engine/Tensors.h"
#include "core/base/Error.h"

#include <torch/torch.h>

#include <memory>

namespace splitseg::engine {

torch::Tensor toTensor(const Volume& v) {
  const auto& s = v.size();
  return torch::from_blob(const_cast<float*>(v.data()), {s[2], s[1], s[0]}, torch::kFloat).clone();
}

torch::Tensor toTensor(Volume&& v) {
  const auto s = v.size();
  auto voxels = std::make_unique<std::vector<float>>(std::move(v.voxels()));
  auto t = torch::from_blob(voxels->data(), {s[2], s[1], s[0]}, [p = voxels.get()](void*) { delete p; }, torch::kFloat);
  voxels.release();  // the tensor's storage owns them now
  return t;
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
  if (dhw.dim() != 3 || dhw.size(0) != geometry.size[2] || dhw.size(1) != geometry.size[1] ||
      dhw.size(2) != geometry.size[0])
    throw InvalidArgument("tensor shape does not match the volume geometry");
  Volume v(geometry);
  // Converted and copied straight into the volume: no float intermediate beside a label map.
  torch::from_blob(v.data(), {dhw.size(0), dhw.size(1), dhw.size(2)}, torch::kFloat).copy_(dhw.detach());
  return v;
}

} // namespace splitseg::engine
