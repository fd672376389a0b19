#include "core/io/VolumeWriter.h"

#include "core/base/Error.h"
#include "core/io/AtomicWrite.h"
#include "core/io/ItkConvert.h"
#include "core/io/VolumeReader.h"

#include <itkCastImageFilter.h>
#include <itkImageFileWriter.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace splitseg::io {

namespace {

template <typename T>
void writeTyped(const Volume& v, const std::string& path, bool compress) {
  using Out = itk::Image<T, 3>;
  Volume conv = v;
  if constexpr (std::is_integral_v<T>) {
    const float lo = static_cast<float>(std::numeric_limits<T>::lowest());
    const float hi = static_cast<float>(std::numeric_limits<T>::max());
    for (float& x : conv.voxels()) x = std::isfinite(x) ? std::round(std::clamp(x, lo, hi)) : 0.0f;
  }
  auto cast = itk::CastImageFilter<ItkImage, Out>::New();
  cast->SetInput(toItk(conv));
  auto writer = itk::ImageFileWriter<Out>::New();
  writer->SetInput(cast->GetOutput());
  writer->SetFileName(path);
  writer->SetUseCompression(compress);
  writer->Update();
}

} // namespace

void writeVolume(const Volume& v, const std::string& path, const WriteOptions& options) {
  if (v.empty() || v.voxelCount() != static_cast<std::int64_t>(v.voxels().size()))
    throw InvalidArgument(path + ": volume to write is empty or its voxels do not match its size");
  std::string name = std::filesystem::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!isImagePath(name) || name.find('.') == std::string::npos)
    throw InvalidArgument(path + ": unknown image file ending (use .nii.gz, .nii, .nrrd, .nhdr, .mha or .mhd)");
  const std::string type = options.pixelType.empty() ? v.pixelType() : options.pixelType;
  atomicWrite(path, [&](const std::string& tmp) {
    try {
      if (type == "uint8") writeTyped<std::uint8_t>(v, tmp, options.compress);
      else if (type == "int8") writeTyped<std::int8_t>(v, tmp, options.compress);
      else if (type == "uint16") writeTyped<std::uint16_t>(v, tmp, options.compress);
      else if (type == "int16") writeTyped<std::int16_t>(v, tmp, options.compress);
      else if (type == "uint32") writeTyped<std::uint32_t>(v, tmp, options.compress);
      else if (type == "int32") writeTyped<std::int32_t>(v, tmp, options.compress);
      else if (type == "float32" || type == "float64" || type == "int64" || type == "uint64" || type.empty())
        writeTyped<float>(v, tmp, options.compress);  // float voxels in memory: float32 loses nothing
      else throw InvalidArgument(path + ": unknown pixel type '" + type + "'");
    } catch (const itk::ExceptionObject& e) {
      throw IoError(path, "cannot write: " + itkMessage(e));
    }
  });
}

void writeSegmentation(const Volume& labels, const Geometry& source, const std::string& path) {
  if (labels.size() != source.size) {
    throw InvalidArgument(path + ": segmentation grid " + std::to_string(labels.size()[0]) + "x" +
                          std::to_string(labels.size()[1]) + "x" + std::to_string(labels.size()[2]) +
                          " does not match the source image " + std::to_string(source.size[0]) + "x" +
                          std::to_string(source.size[1]) + "x" + std::to_string(source.size[2]));
  }
  Volume out = labels;
  out.geometry() = source;
  const float maxLabel = labels.empty() ? 0.0f : labels.range().second;
  WriteOptions o;
  o.pixelType = maxLabel > 255.0f ? "uint16" : "uint8";
  writeVolume(out, path, o);
}

} // namespace splitseg::io
