#include "core/io/ItkConvert.h"

#include <algorithm>
#include <cstring>

namespace splitseg::io {

ItkImage::Pointer toItk(const Volume& v) {
  const Geometry& g = v.geometry();
  auto img = ItkImage::New();
  ItkImage::RegionType region;
  ItkImage::SpacingType spacing;
  ItkImage::PointType origin;
  ItkImage::DirectionType direction;
  for (unsigned i = 0; i < 3; ++i) {
    region.SetSize(i, static_cast<itk::SizeValueType>(g.size[i]));
    region.SetIndex(i, 0);
    spacing[i] = g.spacing[i];
    origin[i] = g.origin[i];
    for (unsigned j = 0; j < 3; ++j) direction(i, j) = g.direction[i * 3 + j];
  }
  img->SetRegions(region);
  img->SetSpacing(spacing);
  img->SetOrigin(origin);
  img->SetDirection(direction);
  img->Allocate();
  std::copy(v.voxels().begin(), v.voxels().end(), img->GetBufferPointer());
  return img;
}

Volume fromItk(const ItkImage* img, std::string pixelType) {
  Geometry g;
  const auto region = img->GetLargestPossibleRegion();
  for (unsigned i = 0; i < 3; ++i) {
    g.size[i] = static_cast<std::int64_t>(region.GetSize(i));
    g.spacing[i] = img->GetSpacing()[i];
    g.origin[i] = img->GetOrigin()[i];
    for (unsigned j = 0; j < 3; ++j) g.direction[i * 3 + j] = img->GetDirection()(i, j);
  }
  Volume v(g);
  const float* src = img->GetBufferPointer();
  std::copy(src, src + v.voxelCount(), v.data());
  v.setPixelType(std::move(pixelType));
  return v;
}

std::string pixelTypeName(itk::IOComponentEnum t) {
  using C = itk::IOComponentEnum;
  switch (t) {
    case C::UCHAR: return "uint8";
    case C::CHAR: return "int8";
    case C::USHORT: return "uint16";
    case C::SHORT: return "int16";
    case C::UINT: return "uint32";
    case C::INT: return "int32";
    case C::ULONG: case C::ULONGLONG: return "uint64";
    case C::LONG: case C::LONGLONG: return "int64";
    case C::FLOAT: return "float32";
    case C::DOUBLE: return "float64";
    default: return "";
  }
}

std::string itkMessage(const itk::ExceptionObject& e) {
  std::string d = e.GetDescription() ? e.GetDescription() : "";
  if (d.empty()) d = e.what();
  // ITK descriptions often end in newlines and carry several lines; keep them on one line.
  std::replace(d.begin(), d.end(), '\n', ' ');
  while (!d.empty() && d.back() == ' ') d.pop_back();
  return d;
}

} // namespace splitseg::io
