#pragma once
// The input of fuzz_gzip_ratio, shared with make_fuzz_seeds. Mutated gzip bytes are almost
// never valid gzip, so the target builds the compressed files itself from a description: a
// NIfTI-1 header, an NRRD header's fields, the voxel bytes, and how much more to claim, fill,
// cut or forge. All fields are optional: a short input reads as zeros.
//
//   [0]        NIfTI flags (Flags below)          [1]        NRRD flags (Flags; kRepair unused)
//   [2, 4)     bytes to cut off the end (u16 LE)  [4, 8)     extra fill in KiB (u32 LE)
//   [8, 356)   NIfTI-1 header, 348 bytes          [356]      NRRD type (index into kNrrdTypes)
//   [357]      NRRD options (NrrdOptions)         [358]      NRRD byte skip (int8)
//   [359]      unused                             [360, 372) NRRD sizes, 3 x u32 LE
//   [372, ...) voxel bytes, the start of both bodies; zeros follow as the fill mode says
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace splitseg::fuzz::gzratio {

constexpr std::size_t kNiftiFlags = 0, kNrrdFlags = 1, kCut = 2, kExtraKiB = 4, kNiftiHeader = 8, kNrrdType = 356,
                      kNrrdOptions = 357, kNrrdSkip = 358, kNrrdSizes = 360, kBody = 372;

enum Flags : std::uint8_t {
  kRepair = 1,         // NIfTI: force sizeof_hdr 348, magic "n+1", vox_offset >= 352 and a zero extension flag
  kFillShift = 1,      // bits 1-2: kFillNone, kFillClaimed, kFillClaimedPlusExtra, kFillExtra
  kFillMask = 6,
  kForgeSize = 8,      // gzip trailer ISIZE = the size the header claims, whatever the stream holds
  kTruncate = 16,      // cut u16 [kCut] bytes off the end of the compressed file
  kSecondMember = 32,  // append a second gzip member holding the voxel bytes again
  kBadCrc = 64,        // flip the trailer's CRC32
  kStoredBody = 128,   // the header and voxel bytes as stored (level 0) blocks, not level 1
};
enum Fill { kFillNone = 0, kFillClaimed = 1, kFillClaimedPlusExtra = 2, kFillExtra = 3 };

enum NrrdOptions : std::uint8_t {
  kEndian = 1,       // write an "endian:" line
  kBigEndian = 2,    //   ... saying big
  kByteSkip = 4,     // write "byte skip: <int8 [kNrrdSkip]>"
  kGzName = 8,       // "encoding: gz" instead of "gzip"
  kFourDims = 16,    // "dimension: 4", sizes a b c 1
  kSpacings = 32,    // "spacings: 1 1 1"
};

constexpr const char* kNrrdTypes[] = {"uint8", "int8",   "int16",  "uint16", "int32", "uint32",
                                      "int64", "uint64", "float",  "double", "block", "short"};
constexpr std::size_t kNrrdTypeCount = sizeof kNrrdTypes / sizeof kNrrdTypes[0];
constexpr int kNrrdTypeBytes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 1, 2};

// Fill is capped so that the compressed file stays about 1 MB (deflate's best ratio is ~1000:1);
// the claim itself is not: the reader must refuse what it cannot afford before inflating it.
constexpr std::uint64_t kMaxFill = std::uint64_t{1} << 30;

// For seeds: an honest NIfTI-1 header of a 3D volume (vox_offset 352, unit spacing).
inline std::string niftiHeader(std::int16_t x, std::int16_t y, std::int16_t z, std::int16_t datatype, std::int16_t bitpix) {
  std::string h(348, '\0');
  auto put = [&](std::size_t off, const void* v, std::size_t n) { std::memcpy(&h[off], v, n); };
  const std::int32_t sizeofHdr = 348;
  put(0, &sizeofHdr, 4);
  const std::int16_t dim[8] = {3, x, y, z, 1, 1, 1, 1};
  put(40, dim, sizeof dim);
  put(70, &datatype, 2);
  put(72, &bitpix, 2);
  const float pixdim[8] = {1, 1, 1, 1, 0, 0, 0, 0};
  put(76, pixdim, sizeof pixdim);
  const float voxOffset = 352;
  put(108, &voxOffset, 4);
  h[123] = 2;  // xyzt_units: mm
  put(344, "n+1", 4);
  return h;
}

struct Description {
  std::uint8_t niftiFlags = 0, nrrdFlags = 0;
  std::uint16_t cut = 0;
  std::uint32_t extraKiB = 0;
  std::string niftiHeader = std::string(348, '\0');
  std::uint8_t nrrdType = 0, nrrdOptions = 0;
  std::int8_t nrrdSkip = 0;
  std::uint32_t nrrdSizes[3] = {1, 1, 1};
  std::string body;

  std::string bytes() const {
    std::string in(kBody, '\0');
    in[kNiftiFlags] = static_cast<char>(niftiFlags);
    in[kNrrdFlags] = static_cast<char>(nrrdFlags);
    std::memcpy(&in[kCut], &cut, 2);  // the fuzzer and the seeds run on little-endian machines
    std::memcpy(&in[kExtraKiB], &extraKiB, 4);
    std::memcpy(&in[kNiftiHeader], niftiHeader.data(), std::min<std::size_t>(348, niftiHeader.size()));
    in[kNrrdType] = static_cast<char>(nrrdType);
    in[kNrrdOptions] = static_cast<char>(nrrdOptions);
    in[kNrrdSkip] = static_cast<char>(nrrdSkip);
    std::memcpy(&in[kNrrdSizes], nrrdSizes, 12);
    return in + body;
  }
};

inline std::uint8_t fill(Fill f) { return static_cast<std::uint8_t>(f << kFillShift); }

} // namespace splitseg::fuzz::gzratio
