#pragma once
// Conversion between Volume (float voxels + Geometry) and itk::Image<float, 3>, and the
// names of ITK pixel types. Internal to core/io and core/dataset; nothing above sees ITK.
#include "core/volume/Volume.h"

#include <itkImage.h>
#include <itkImageIOBase.h>

#include <string>

namespace splitseg::io {

using ItkImage = itk::Image<float, 3>;

ItkImage::Pointer toItk(const Volume& volume);
Volume fromItk(const ItkImage* image, std::string pixelType);

// "int16", "uint8", "float32", ... for an ITK component type; "" when unknown.
std::string pixelTypeName(itk::IOComponentEnum type);

// Short text of an ITK exception without its file/line preamble.
std::string itkMessage(const itk::ExceptionObject& e);

} // namespace splitseg::io
