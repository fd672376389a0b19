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

namespace {
template <typename T>
void convert(const unsigned char* raw, float* out, std::size_t n) {
  const T* in = reinterpret_cast<const T*>(raw);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

bool readOnce(itk::ImageIOBase* io, std::vector<unsigned char>& raw, unsigned char fill, const itk::ImageIORegion* part) {
  std::fill(raw.begin(), raw.end(), fill);
  itk::ImageIORegion region(io->GetNumberOfDimensions());
  for (unsigned d = 0; d < io->GetNumberOfDimensions(); ++d) {
    region.SetIndex(d, 0);
    region.SetSize(d, io->GetDimensions(d));
  }
  io->SetIORegion(part ? *part : region);
  io->Read(raw.data());
  // A reader that stops early leaves at least the last byte unwritten; real data cannot end in
  // both patterns, so "last byte still the pattern" twice means the file ended early, even
  // when only a few bytes are missing.
  return raw.empty() || raw.back() != fill;
}
} // namespace

bool componentsToFloat(itk::IOComponentEnum t, const unsigned char* raw, float* out, std::size_t n) {
  using C = itk::IOComponentEnum;
  switch (t) {
    case C::UCHAR: convert<std::uint8_t>(raw, out, n); return true;
    case C::CHAR: convert<std::int8_t>(raw, out, n); return true;
    case C::USHORT: convert<std::uint16_t>(raw, out, n); return true;
    case C::SHORT: convert<std::int16_t>(raw, out, n); return true;
    case C::UINT: convert<std::uint32_t>(raw, out, n); return true;
    case C::INT: convert<std::int32_t>(raw, out, n); return true;
    case C::ULONG: case C::ULONGLONG: convert<std::uint64_t>(raw, out, n); return true;
    case C::LONG: case C::LONGLONG: convert<std::int64_t>(raw, out, n); return true;
    case C::FLOAT: convert<float>(raw, out, n); return true;
    case C::DOUBLE: convert<double>(raw, out, n); return true;
    default: return false;
  }
}

bool readComplete(itk::ImageIOBase* io, std::vector<unsigned char>& raw, const itk::ImageIORegion* part) {
  return readOnce(io, raw, 0xA5, part) || readOnce(io, raw, 0x5A, part);
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
