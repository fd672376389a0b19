#pragma once
// Reading 3D images through ITK: NIfTI (.nii, .nii.gz), NRRD (.nrrd, .nhdr), MetaImage
// (.mha, .mhd) and DICOM series (a folder; see DicomSeries.h). Voxels become float, the
// geometry (spacing, origin, direction, LPS as ITK) and original pixel type are kept.
// Errors: IoError (missing/unreadable), FormatError (not an image, truncated, corrupt,
// not 3D, several components, NaN/Inf voxels), InvalidArgument (folder with several DICOM
// series and none chosen). Every message names the file.
#include "core/volume/Volume.h"

#include <string>

namespace splitseg::io {

struct ReadOptions {
  std::string dicomSeriesUid;    // folder with several series: which one ("" = the only one)
  bool allowNonFinite = false;   // false: NaN/Inf voxels are a FormatError
};

struct ImageHeader {
  Geometry geometry;
  std::string pixelType;   // "int16", "float32", ...
  std::string format;      // "NIfTI", "NRRD", "MetaImage", "DICOM"
};

Volume readVolume(const std::string& path, const ReadOptions& options = {});

// Geometry and pixel type without reading voxels (fast; used to validate datasets).
ImageHeader readHeader(const std::string& path, const ReadOptions& options = {});

// What `info` shows: the header and the value range, the voxels read in slabs and never held
// (a NIfTI or MetaImage file of any size costs one slab; NRRD and single DICOM files, which ITK
// cannot read in parts, cost their decoded size; a DICOM folder its float volume).
struct VolumeSummary {
  ImageHeader header;
  float min = 0.0f, max = 0.0f;   // over the finite voxels
  std::int64_t nonFinite = 0;     // NaN and infinite voxels, counted instead of refused
  std::string nonFiniteNote;      // "N voxels are NaN or infinite (first at x,y,z)" when any
};
VolumeSummary summarizeVolume(const std::string& path, const ReadOptions& options = {});

// True for the file endings above (case-insensitive) or an existing folder.
bool isImagePath(const std::string& path);

} // namespace splitseg::io
