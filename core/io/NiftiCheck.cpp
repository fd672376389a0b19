#include "core/io/NiftiCheck.h"

#include "core/base/Error.h"
#include "core/volume/GeometryCheck.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using Gz = std::unique_ptr<gzFile_s, GzCloser>;

Gz openGz(const std::string& path) {
  Gz f(gzopen(path.c_str(), "rb"));  // reads plain files too
  if (!f) throw IoError(path, "cannot open for reading");
  return f;
}

// Reads n bytes in pieces; the count read.
std::uint64_t readSome(gzFile f, unsigned char* dst, std::uint64_t n) {
  std::uint64_t got = 0;
  while (got < n) {
    const int r = gzread(f, dst + got, static_cast<unsigned>(std::min<std::uint64_t>(n - got, 1 << 20)));
    if (r <= 0) break;
    got += static_cast<std::uint64_t>(r);
  }
  return got;
}

struct Raw {
  const unsigned char* h;
  bool swap;
  template <typename T>
  T get(int off) const {
    unsigned char b[sizeof(T)];
    for (std::size_t i = 0; i < sizeof(T); ++i) b[i] = h[off + (swap ? sizeof(T) - 1 - i : i)];
    T v;
    std::memcpy(&v, b, sizeof(T));
    return v;
  }
};

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

int bytesOf(int datatype) {
  switch (datatype) {
    case 2: case 256: return 1;             // uint8, int8
    case 4: case 512: return 2;             // int16, uint16
    case 8: case 16: case 768: return 4;    // int32, float32, uint32
    case 64: case 1024: case 1280: return 8;  // float64, int64, uint64
    default: return 0;                      // complex, RGB, ...: ITK or the reader refuses them
  }
}

} // namespace

std::optional<NiftiInfo> checkNiftiHeader(const std::string& path) {
  unsigned char h[540] = {};
  std::uint64_t got;
  {
    Gz f = openGz(path);
    got = readSome(f.get(), h, sizeof h);
  }
  if (got < 4) return std::nullopt;
  std::int32_t sizeofHdr;
  std::memcpy(&sizeofHdr, h, 4);
  NiftiInfo n;
  const std::int32_t swapped = static_cast<std::int32_t>(__builtin_bswap32(static_cast<std::uint32_t>(sizeofHdr)));
  if (sizeofHdr == 348 || sizeofHdr == 540) n.swap = false;
  else if (swapped == 348 || swapped == 540) n.swap = true;
  else return std::nullopt;
  n.version = (n.swap ? swapped : sizeofHdr) == 540 ? 2 : 1;
  if (got < (n.version == 1 ? 348u : 540u)) throw FormatError(path, "truncated: shorter than a NIfTI header");
  const Raw r{h, n.swap};
  const bool v1 = n.version == 1;
  auto real = [&](int off1, int off2) { return v1 ? static_cast<double>(r.get<float>(off1)) : r.get<double>(off2); };
  auto dim = [&](int i) { return v1 ? static_cast<std::int64_t>(r.get<std::int16_t>(40 + 2 * i)) : r.get<std::int64_t>(16 + 8 * i); };
  n.singleFile = v1 ? std::memcmp(h + 344, "n+1", 4) == 0 : std::memcmp(h + 4, "n+2", 3) == 0;

  const std::int64_t dims = dim(0);
  if (dims < 1 || dims > 7) throw FormatError(path, "NIfTI header has " + std::to_string(dims) + " dimensions (1..7 allowed)");
  std::array<std::int64_t, 3> size{1, 1, 1};
  std::int64_t extra = 1;
  for (int d = 1; d <= dims; ++d) {
    const std::int64_t s = dim(d);
    if (s < 1) throw FormatError(path, "NIfTI size along axis " + std::to_string(d - 1) + " is " + std::to_string(s) + " (must be positive)");
    if (d <= 3) size[d - 1] = s;
    else if (__builtin_mul_overflow(extra, s, &extra)) throw FormatError(path, "NIfTI size overflows");
  }
  // Spacing, qfac, origin, quaternion and sform all reach ITK's matrix code: finite or refused.
  static const char* pixName[4] = {"qfac (pixdim[0])", "spacing along x", "spacing along y", "spacing along z"};
  for (int i = 0; i < 4; ++i) {
    const double v = real(76 + 4 * i, 104 + 8 * i);
    if (!std::isfinite(v)) throw FormatError(path, std::string("NIfTI ") + pixName[i] + " is " + num(v));
    // 0 is read as 1 by the NIfTI library (as ITK does); other values must be plausible.
    if (i > 0 && i <= dims && v != 0 && !(std::fabs(v) >= 1e-6 && std::fabs(v) <= 1e6))
      throw FormatError(path, std::string("NIfTI ") + pixName[i] + " is " + num(v) + " (must be 1e-6..1e6 mm)");
  }
  static const char* qName[6] = {"quatern_b", "quatern_c", "quatern_d", "qoffset_x", "qoffset_y", "qoffset_z"};
  for (int i = 0; i < 6; ++i) {
    const double v = real(256 + 4 * i, 352 + 8 * i);
    if (!std::isfinite(v) || std::fabs(v) > 1e9) throw FormatError(path, std::string("NIfTI ") + qName[i] + " is " + num(v));
  }
  for (int i = 0; i < 12; ++i) {
    const double v = real(280 + 4 * i, 400 + 8 * i);
    if (!std::isfinite(v) || std::fabs(v) > 1e9)
      throw FormatError(path, "NIfTI srow_" + std::string(1, "xyz"[i / 4]) + "[" + std::to_string(i % 4) + "] is " + num(v));
  }
  const double off = v1 ? static_cast<double>(r.get<float>(108)) : static_cast<double>(r.get<std::int64_t>(168));
  if (!std::isfinite(off) || off < 0 || off >= 1073741824.0 || std::floor(off) != off)
    throw FormatError(path, "NIfTI vox_offset " + num(off) + " is not a whole byte offset below 1 GiB");
  n.voxOffset = static_cast<std::uint64_t>(off);
  if (n.singleFile && n.voxOffset < (v1 ? 348u : 540u))
    throw FormatError(path, "NIfTI vox_offset " + num(off) + " points inside the header");
  n.sclSlope = real(112, 176);
  n.sclInter = real(116, 184);
  if (!std::isfinite(n.sclSlope) || !std::isfinite(n.sclInter)) n.sclSlope = 0, n.sclInter = 0;
  n.datatype = v1 ? r.get<std::int16_t>(70) : r.get<std::int16_t>(12);
  n.bytesPerVoxel = bytesOf(n.datatype);
  n.size = size;
  std::int64_t voxels = 0;
  if (!checkedVoxelCount(size, voxels) || __builtin_mul_overflow(voxels, extra, &voxels))
    throw FormatError(path, "NIfTI size overflows a voxel count");
  const std::int64_t cap = voxelCap(1);  // sane numbers; the read judges what loading costs
  if (voxels > cap)
    throw FormatError(path, "NIfTI size " + std::to_string(size[0]) + "x" + std::to_string(size[1]) + "x" + std::to_string(size[2]) +
                                " (" + std::to_string(voxels) + " voxels) exceeds what the available memory allows (" +
                                std::to_string(cap) + ")");
  n.dataBytes = static_cast<std::uint64_t>(voxels) * static_cast<std::uint64_t>(std::max(n.bytesPerVoxel, 1));
  return n;
}

void checkNiftiData(const std::string& path, const NiftiInfo& n, bool scanNonFinite, std::string* nonFinite) {
  if (!n.singleFile || n.bytesPerVoxel == 0) return;
  const std::uint64_t need = n.voxOffset + n.dataBytes;
  const bool isFloat = n.datatype == 16 || n.datatype == 64;
  Gz f = openGz(path);
  if (gzdirect(f.get()) && !(scanNonFinite && isFloat)) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (!ec && size < need)
      throw FormatError(path, "truncated: " + std::to_string(size) + " bytes, the header needs " + std::to_string(need));
    return;
  }
  if (!gzdirect(f.get()) && !(scanNonFinite && isFloat)) {
    // Fast path: a complete gzip member ends with its decompressed size mod 2^32.
    std::ifstream raw(path, std::ios::binary | std::ios::ate);
    unsigned char tail[4] = {0, 0, 0, 0};
    if (raw && raw.tellg() >= 4) {
      raw.seekg(-4, std::ios::end);
      raw.read(reinterpret_cast<char*>(tail), 4);
      const std::uint32_t isize = tail[0] | (tail[1] << 8) | (tail[2] << 16) | (std::uint32_t(tail[3]) << 24);
      if (raw && isize == static_cast<std::uint32_t>(need)) return;
    }
  }
  // Stream through (skipping the header and extensions in pieces, never allocating vox_offset).
  std::vector<unsigned char> buf(1 << 20);
  std::uint64_t skip = n.voxOffset;
  while (skip > 0) {
    const std::uint64_t r = readSome(f.get(), buf.data(), std::min<std::uint64_t>(skip, buf.size()));
    if (r == 0) throw FormatError(path, "truncated: ends before its voxel data (vox_offset " + std::to_string(n.voxOffset) + ")");
    skip -= r;
  }
  const std::size_t elem = static_cast<std::size_t>(n.bytesPerVoxel);
  std::uint64_t got = 0, bad = 0, first = 0;
  while (got < n.dataBytes) {
    const std::uint64_t want = std::min<std::uint64_t>(n.dataBytes - got, buf.size() / elem * elem);
    const std::uint64_t r = readSome(f.get(), buf.data(), want);
    if (r == 0) break;
    if (scanNonFinite && isFloat)
      for (std::size_t o = 0; o + elem <= r; o += elem) {
        const Raw e{buf.data() + o, n.swap};
        const double v = elem == 4 ? static_cast<double>(e.get<float>(0)) : e.get<double>(0);
        if (!std::isfinite(v) && bad++ == 0) first = (got + o) / elem;
      }
    got += r;
  }
  if (got < n.dataBytes)
    throw FormatError(path, "truncated: holds " + std::to_string(got) + " bytes of voxel data, the header needs " +
                                std::to_string(n.dataBytes));
  if (bad) {
    const std::uint64_t nx = static_cast<std::uint64_t>(n.size[0]), ny = static_cast<std::uint64_t>(n.size[1]);
    const std::string text = std::to_string(bad) + " voxels are NaN or infinite (first at " + std::to_string(first % nx) + "," +
                             std::to_string((first / nx) % ny) + "," + std::to_string(first / (nx * ny)) + ")";
    if (!nonFinite) throw FormatError(path, text);
    *nonFinite = text;
  }
}

namespace {

double voxelValue(const Raw& e, int datatype) {
  switch (datatype) {
    case 2: return e.get<std::uint8_t>(0);
    case 256: return e.get<std::int8_t>(0);
    case 4: return e.get<std::int16_t>(0);
    case 512: return e.get<std::uint16_t>(0);
    case 8: return e.get<std::int32_t>(0);
    case 768: return e.get<std::uint32_t>(0);
    case 16: return e.get<float>(0);
    case 64: return e.get<double>(0);
    case 1024: return static_cast<double>(e.get<std::int64_t>(0));
    default: return static_cast<double>(e.get<std::uint64_t>(0));  // 1280
  }
}

} // namespace

NiftiRange streamNiftiRange(const std::string& path, const NiftiInfo& n) {
  if (!n.singleFile || n.bytesPerVoxel == 0) throw FormatError(path, "not a single-file NIfTI of a scalar type");
  const bool scaled = n.sclSlope != 0 && !(n.sclSlope == 1 && n.sclInter == 0);
  Gz f = openGz(path);
  std::vector<unsigned char> buf(1 << 20);
  for (std::uint64_t skip = n.voxOffset; skip > 0;) {
    const std::uint64_t r = readSome(f.get(), buf.data(), std::min<std::uint64_t>(skip, buf.size()));
    if (r == 0) throw FormatError(path, "truncated: ends before its voxel data (vox_offset " + std::to_string(n.voxOffset) + ")");
    skip -= r;
  }
  const std::size_t elem = static_cast<std::size_t>(n.bytesPerVoxel);
  NiftiRange out;
  std::uint64_t got = 0;
  while (got < n.dataBytes) {
    const std::uint64_t want = std::min<std::uint64_t>(n.dataBytes - got, buf.size() / elem * elem);
    const std::uint64_t r = readSome(f.get(), buf.data(), want);
    if (r == 0) break;
    for (std::size_t o = 0; o + elem <= r; o += elem) {
      double v = voxelValue(Raw{buf.data() + o, n.swap}, n.datatype);
      if (scaled) v = v * n.sclSlope + n.sclInter;
      const float x = static_cast<float>(v);
      if (!std::isfinite(x)) {
        if (out.nonFinite++ == 0) out.first = (got + o) / elem;
        continue;
      }
      if (!out.any || x < out.min) out.min = x;
      if (!out.any || x > out.max) out.max = x;
      out.any = true;
    }
    got += r;
  }
  if (got < n.dataBytes)
    throw FormatError(path, "truncated: holds " + std::to_string(got) + " bytes of voxel data, the header needs " +
                                std::to_string(n.dataBytes));
  return out;
}

} // namespace splitseg::io
