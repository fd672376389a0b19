#pragma once
// The NIfTI header read by hand, before ITK: ITK/VNL abort() on a non-finite matrix, and ITK
// zero-fills a short file or turns NaN voxels into 0 silently. Internal to core/io.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace splitseg::io {

struct NiftiInfo {
  int version = 1;           // 1 (348-byte header) or 2 (540-byte header)
  bool swap = false;         // stored in the other byte order
  bool singleFile = false;   // magic n+1 / n+2: the voxels follow the header in this file
  int datatype = 0;
  int bytesPerVoxel = 0;
  std::array<std::int64_t, 3> size{1, 1, 1};
  std::uint64_t voxOffset = 0;  // validated: finite, whole, below 1 GiB
  std::uint64_t dataBytes = 0;  // voxels * bytesPerVoxel (overflow-checked, under the voxel cap)
  double sclSlope = 0, sclInter = 0;  // as stored (a slope of 0 means no scaling)
};

// nullopt when the file does not start like a NIfTI/Analyze header (ITK judges it then).
// Throws FormatError naming path for a NIfTI header with non-finite spacing, origin, quaternion
// or sform, a bad dimension, an unvalidated vox_offset, or a size beyond the voxel cap.
std::optional<NiftiInfo> checkNiftiHeader(const std::string& path);

// For single-file NIfTI: the file holds vox_offset + dataBytes (decompressed for .nii.gz);
// with scanNonFinite, float data is scanned for NaN/Inf (ITK would turn them into zeros).
// With `nonFinite` given, NaN/Inf voxels are counted there ("N voxels are NaN or infinite (first
// at x,y,z)", empty when none) instead of refused.
void checkNiftiData(const std::string& path, const NiftiInfo& info, bool scanNonFinite, std::string* nonFinite = nullptr);

// The range of a single-file NIfTI's voxels, streamed from the (decompressed) file once in
// 1 MiB pieces: constant memory whatever its size. Values as the reader gives them (scl_slope and
// scl_inter applied where the slope is neither 0 nor 1 with intercept 0); NaN and infinities
// counted, not in the range. Throws FormatError for a truncated file.
struct NiftiRange {
  float min = 0, max = 0;
  bool any = false;           // a finite voxel was seen
  std::uint64_t nonFinite = 0;
  std::uint64_t first = 0;    // index of the first non-finite voxel
};
NiftiRange streamNiftiRange(const std::string& path, const NiftiInfo& info);

} // namespace splitseg::io
