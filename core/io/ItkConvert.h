#pragma once
// Conversion between Volume (float voxels + Geometry) and itk::Image<float, 3>, and the
// names of ITK pixel types. Internal to core/io and core/dataset; nothing above sees ITK.
#include "core/volume/Volume.h"

#include <itkImage.h>
#include <itkImageIOBase.h>

#include <string>
#include <vector>

namespace splitseg::io {

using ItkImage = itk::Image<float, 3>;

ItkImage::Pointer toItk(const Volume& volume);
Volume fromItk(const ItkImage* image, std::string pixelType);

// "int16", "uint8", "float32", ... for an ITK component type; "" when unknown.
std::string pixelTypeName(itk::IOComponentEnum type);

// Converts n components of type t at raw into floats; false for an unsupported type.
bool componentsToFloat(itk::IOComponentEnum t, const unsigned char* raw, float* out, std::size_t n);

// Reads the IO's whole largest region into raw (sized by the caller); false when the file
// ended early. ITK readers (NIfTI, MetaImage, GDCM) leave a truncated file's tail unwritten
// without an error, so raw is pre-filled with a pattern and, when its last byte still holds
// it, read again with a second one.
// part: a region of it instead (raw sized for that region).
bool readComplete(itk::ImageIOBase* io, std::vector<unsigned char>& raw, const itk::ImageIORegion* part = nullptr);

// Short text of an ITK exception without its file/line preamble.
std::string itkMessage(const itk::ExceptionObject& e);

} // namespace splitseg::io
