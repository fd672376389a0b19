#pragma once
// Reader for InVesalius 3 projects (.inv3): a gzip'd tar with main.plist (shape, dtype,
// spacing), matrix.dat (raw little-endian voxels, z,y,x order) and mask_N.dat/.plist
// (uint8 0/255 with a one-voxel border at index 0 on each axis, which is cropped here).
// Used to turn Debian's invesalius-examples head CT into the demo case.
#include "core/volume/Volume.h"

#include <string>
#include <vector>

namespace splitseg::io {

struct InVesaliusMask {
  std::string name;
  double thresholdLow = 0, thresholdHigh = 0;  // HU range the mask was thresholded with
  Volume mask;                                  // 0/1, same grid as the image
};

struct InVesaliusProject {
  std::string name, modality;
  Volume image;                       // pixel type from main.plist (int16 for CT)
  std::vector<InVesaliusMask> masks;  // in file order (mask_0, mask_1, ...)
};

// Throws IoError (missing/unreadable), FormatError (not an .inv3, truncated, sizes that do
// not match the plist).
InVesaliusProject readInVesalius(const std::string& path);

// Where Debian's invesalius-examples puts Cranium.inv3, "" when not installed.
std::string findInVesaliusSample();

} // namespace splitseg::io
