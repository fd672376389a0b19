#pragma once
// Writing volumes through ITK, atomically (see AtomicWrite.h). The format follows the file
// ending: .nii/.nii.gz, .nrrd/.nhdr, .mha/.mhd. Geometry is written as is, so a
// segmentation given its source image's geometry overlays it in Slicer or ITK-SNAP.
#include "core/volume/Volume.h"

#include <string>

namespace splitseg::io {

struct WriteOptions {
  std::string pixelType;   // "" = the volume's pixelType(); "uint8", "int16", "float32", ...
  bool compress = true;    // NRRD / MetaImage compression (.nii.gz is compressed by its name)
};

// Values are rounded and clamped to integer pixel types. Throws InvalidArgument for an
// unknown ending or pixel type, IoError when the file cannot be written.
void writeVolume(const Volume& volume, const std::string& path, const WriteOptions& options = {});

// Writes a label map in the source image's geometry (uint8, or uint16 above 255 labels).
// The label grid must match source in size; its geometry is replaced by source's.
void writeSegmentation(const Volume& labels, const Geometry& source, const std::string& path);

} // namespace splitseg::io
