#include "core/postprocess/LargestComponent.h"
#include "core/base/Error.h"

#include <itkConnectedComponentImageFilter.h>
#include <itkImage.h>

#include <array>
#include <cmath>
#include <string>

namespace splitseg::postprocess {

namespace {
using Mask = itk::Image<std::uint8_t, 3>;
using Components = itk::Image<std::uint32_t, 3>;
} // namespace

std::vector<LabelComponents> keepLargestComponents(Volume& labels) {
  const auto& size = labels.size();
  const std::int64_t n = labels.voxelCount();
  std::array<std::int64_t, 256> count{};
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = labels.data()[i];
    if (!(v >= 0 && v <= 255) || std::floor(v) != v)
      throw InvalidArgument("largest component: a label value is not an integer in 0..255 (" + std::to_string(v) + ")");
    ++count[static_cast<std::size_t>(v)];
  }
  std::vector<LabelComponents> out;
  if (n == 0) return out;
  auto mask = Mask::New();
  Mask::RegionType region;
  region.SetSize({static_cast<itk::SizeValueType>(size[0]), static_cast<itk::SizeValueType>(size[1]),
                  static_cast<itk::SizeValueType>(size[2])});
  mask->SetRegions(region);
  mask->Allocate();
  std::uint8_t* m = mask->GetBufferPointer();
  for (int label = 1; label < 256; ++label) {
    if (count[static_cast<std::size_t>(label)] == 0) continue;
    for (std::int64_t i = 0; i < n; ++i) m[i] = labels.data()[i] == static_cast<float>(label) ? 1 : 0;
    mask->Modified();
    auto cc = itk::ConnectedComponentImageFilter<Mask, Components>::New();
    cc->SetInput(mask);
    cc->SetFullyConnected(true);  // 26 neighbours, as nnU-Net (skimage's full connectivity)
    cc->Update();
    const std::uint32_t* c = cc->GetOutput()->GetBufferPointer();
    // The filter numbers regions 1..k in the order it meets them (x fastest).
    std::vector<std::int64_t> voxels(static_cast<std::size_t>(cc->GetObjectCount()) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) ++voxels[c[i]];
    std::size_t largest = 1;
    for (std::size_t k = 2; k < voxels.size(); ++k)
      if (voxels[k] > voxels[largest]) largest = k;
    LabelComponents r;
    r.label = label;
    r.components = static_cast<std::int64_t>(voxels.size()) - 1;
    r.kept = voxels[largest];
    r.removed = count[static_cast<std::size_t>(label)] - r.kept;
    if (r.removed > 0)
      for (std::int64_t i = 0; i < n; ++i)
        if (c[i] != 0 && c[i] != largest) labels.data()[i] = 0.0f;
    out.push_back(r);
  }
  return out;
}

} // namespace splitseg::postprocess
