// Decompression bombs (issue 50): a .nii.gz and a gzip-encoded .nrrd whose headers claim what the
// input says and whose streams inflate to what the input says, up to 1 GiB from about 1 MB of
// file. The input is a description (GzipRatioInput.h), not gzip bytes: mutated gzip is almost
// never valid, so this target compresses (zlib level 1) the header and voxel bytes it is given,
// adds the zeros the fill mode asks for as ready-made deflate blocks (cheap to emit), then cuts,
// forges the trailer or appends a member. readHeader and readVolume must refuse what the read
// budget (SPLITSEG_READ_MEMORY, 256 MiB here) cannot afford before inflating it, and read the
// rest; only splitseg::Error may come out.
#include "FuzzSupport.h"
#include "GzipRatioInput.h"
#include "core/io/VolumeReader.h"

#include <itkObject.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace {

namespace gr = splitseg::fuzz::gzratio;

std::uint64_t satMul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}
std::uint64_t satAdd(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

// Runs deflate over [p, p+n) with flush, appending what it writes to out.
void deflateInto(z_stream& z, const void* p, std::size_t n, int flush, std::string& out) {
  z.next_in = static_cast<Bytef*>(const_cast<void*>(p));
  z.avail_in = static_cast<uInt>(n);
  unsigned char buf[1 << 16];
  do {
    z.next_out = buf;
    z.avail_out = sizeof buf;
    deflate(&z, flush);
    out.append(reinterpret_cast<const char*>(buf), sizeof buf - z.avail_out);
  } while (z.avail_out == 0 || z.avail_in > 0);
}

constexpr std::size_t kSegment = std::size_t{1} << 20;
const unsigned char kZeros[1 << 16] = {};

// 1 MiB of zeros as raw deflate blocks that end byte-aligned after a full flush and refer to
// nothing before them: any number of copies can follow a full flush of another stream.
struct ZeroSegment {
  std::string blocks;
  uLong crc = 0;
};
const ZeroSegment& zeroSegment() {
  static const ZeroSegment s = [] {
    ZeroSegment seg;
    z_stream z{};
    deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    for (std::size_t done = 0; done < kSegment; done += sizeof kZeros)
      deflateInto(z, kZeros, sizeof kZeros, done + sizeof kZeros < kSegment ? Z_NO_FLUSH : Z_FULL_FLUSH, seg.blocks);
    deflateEnd(&z);
    seg.crc = crc32(0, nullptr, 0);
    for (std::size_t done = 0; done < kSegment; done += sizeof kZeros) seg.crc = crc32(seg.crc, kZeros, sizeof kZeros);
    return seg;
  }();
  return s;
}

// One gzip member, written as it goes.
class GzipMember {
public:
  explicit GzipMember(int level) {
    deflateInit2(&z_, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    out_.assign("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  }
  ~GzipMember() { deflateEnd(&z_); }
  GzipMember(const GzipMember&) = delete;
  GzipMember& operator=(const GzipMember&) = delete;

  void bytes(const void* p, std::size_t n) {
    deflateInto(z_, p, n, Z_NO_FLUSH, out_);
    crc_ = crc32(crc_, static_cast<const Bytef*>(p), static_cast<uInt>(n));
    total_ += n;
  }
  void zeros(std::uint64_t n) {
    if (n >= kSegment) {
      deflateInto(z_, nullptr, 0, Z_FULL_FLUSH, out_);
      const ZeroSegment& seg = zeroSegment();
      for (; n >= kSegment; n -= kSegment) {
        out_ += seg.blocks;
        crc_ = crc32_combine(crc_, seg.crc, static_cast<z_off_t>(kSegment));
        total_ += kSegment;
      }
    }
    for (; n > 0;) {
      const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof kZeros));
      bytes(kZeros, k);
      n -= k;
    }
  }
  // The member with its trailer; isize replaces the true length mod 2^32 when given.
  std::string finish(bool forgeSize, std::uint64_t isize, bool badCrc) {
    deflateInto(z_, nullptr, 0, Z_FINISH, out_);
    const std::uint32_t crc = static_cast<std::uint32_t>(crc_) ^ (badCrc ? 0x5a5a5a5au : 0u);
    const std::uint32_t size = static_cast<std::uint32_t>(forgeSize ? isize : total_);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(crc >> (8 * i)));
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(size >> (8 * i)));
    return std::move(out_);
  }

private:
  z_stream z_{};
  std::string out_;
  uLong crc_ = crc32(0, nullptr, 0);
  std::uint64_t total_ = 0;
};

std::uint64_t fillFor(std::uint8_t flags, std::uint64_t claimed, std::uint64_t have, std::uint32_t extraKiB) {
  const std::uint64_t missing = claimed > have ? claimed - have : 0;
  const std::uint64_t extra = std::uint64_t{extraKiB} * 1024;
  std::uint64_t n = 0;
  switch ((flags & gr::kFillMask) >> gr::kFillShift) {
    case gr::kFillNone: n = 0; break;
    case gr::kFillClaimed: n = missing; break;
    case gr::kFillClaimedPlusExtra: n = satAdd(missing, extra); break;
    default: n = extra; break;
  }
  return std::min(n, gr::kMaxFill);
}

// prefix (compressed) + fill zeros, then the flags' trailer forgery, second member and cut.
std::string compress(std::uint8_t flags, const std::string& prefix, std::uint64_t fill, std::uint64_t claimed,
                     const std::string& body, std::uint16_t cut) {
  // Level 0 (stored blocks, as some writers make them) or level 1; the fill is level-1 blocks.
  const int level = flags & gr::kStoredBody ? 0 : 1;
  std::string file;
  {
    GzipMember m(level);
    m.bytes(prefix.data(), prefix.size());
    m.zeros(fill);
    file = m.finish(flags & gr::kForgeSize, claimed, flags & gr::kBadCrc);
  }
  if (flags & gr::kSecondMember) {
    GzipMember m(level);
    m.bytes(body.data(), body.size());
    file += m.finish(false, 0, false);
  }
  if (flags & gr::kTruncate) file.resize(file.size() - std::min<std::size_t>(cut, file.size()));
  return file;
}

struct Header {
  const unsigned char* h;
  bool swap;
  std::int16_t i16(std::size_t off) const {
    std::uint16_t v;
    std::memcpy(&v, h + off, 2);
    return static_cast<std::int16_t>(swap ? __builtin_bswap16(v) : v);
  }
  float f32(std::size_t off) const {
    std::uint32_t v;
    std::memcpy(&v, h + off, 4);
    if (swap) v = __builtin_bswap32(v);
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  }
};

int niftiBytesPerVoxel(std::int16_t datatype, std::int16_t bitpix) {
  switch (datatype) {
    case 2: case 256: return 1;
    case 4: case 512: return 2;
    case 8: case 16: case 768: return 4;
    case 64: case 1024: case 1280: return 8;
    default: return bitpix >= 8 ? bitpix / 8 : 1;
  }
}

std::string niftiFile(const std::string& in, const std::string& body) {
  const std::uint8_t flags = static_cast<std::uint8_t>(in[gr::kNiftiFlags]);
  std::string hdr = in.substr(gr::kNiftiHeader, 348);
  if (flags & gr::kRepair) {
    const std::int32_t sizeofHdr = 348;
    std::memcpy(&hdr[0], &sizeofHdr, 4);
    std::memcpy(&hdr[344], "n+1", 4);
    float off;
    std::memcpy(&off, &hdr[108], 4);
    if (!(off >= 352 && off <= 65536) || std::floor(off) != off) off = 352;
    std::memcpy(&hdr[108], &off, 4);
  }
  std::int32_t sizeofHdr;
  std::memcpy(&sizeofHdr, hdr.data(), 4);
  const Header h{reinterpret_cast<const unsigned char*>(hdr.data()), sizeofHdr != 348 && __builtin_bswap32(static_cast<std::uint32_t>(sizeofHdr)) == 348};
  // What the header claims: vox_offset + voxels x bytes, saturated.
  std::uint64_t voxels = 1;
  const int dims = h.i16(40);
  if (dims < 1 || dims > 7) voxels = 0;
  for (int d = 1; d <= dims && d <= 7 && voxels > 0; ++d) {
    const std::int16_t s = h.i16(40 + 2 * d);
    voxels = s > 0 ? satMul(voxels, static_cast<std::uint64_t>(s)) : 0;
  }
  const float off = h.f32(108);
  const std::uint64_t offset = std::isfinite(off) && off > 0 && off < 1073741824.0f ? static_cast<std::uint64_t>(off) : 0;
  const std::uint64_t claimed = satAdd(offset, satMul(voxels, static_cast<std::uint64_t>(niftiBytesPerVoxel(h.i16(70), h.i16(72)))));
  std::string prefix = hdr;
  if (flags & gr::kRepair) {
    prefix.append(4, '\0');  // no extensions
    if (offset > prefix.size()) prefix.append(static_cast<std::size_t>(offset - prefix.size()), '\0');
  }
  prefix += body;
  std::uint32_t extra;
  std::memcpy(&extra, &in[gr::kExtraKiB], 4);
  std::uint16_t cut;
  std::memcpy(&cut, &in[gr::kCut], 2);
  return compress(flags, prefix, fillFor(flags, claimed, prefix.size(), extra), claimed, body, cut);
}

std::string nrrdFile(const std::string& in, const std::string& body) {
  const std::uint8_t flags = static_cast<std::uint8_t>(in[gr::kNrrdFlags]);
  const std::uint8_t options = static_cast<std::uint8_t>(in[gr::kNrrdOptions]);
  const std::size_t type = static_cast<std::uint8_t>(in[gr::kNrrdType]) % gr::kNrrdTypeCount;
  std::uint32_t sizes[3];
  std::memcpy(sizes, &in[gr::kNrrdSizes], 12);
  const auto skip = static_cast<std::int8_t>(in[gr::kNrrdSkip]);
  std::string text = "NRRD0004\ntype: " + std::string(gr::kNrrdTypes[type]) + "\n";
  text += (options & gr::kFourDims) ? "dimension: 4\n" : "dimension: 3\n";
  text += "sizes: " + std::to_string(sizes[0]) + " " + std::to_string(sizes[1]) + " " + std::to_string(sizes[2]) +
          ((options & gr::kFourDims) ? " 1\n" : "\n");
  if (options & gr::kSpacings) text += (options & gr::kFourDims) ? "spacings: 1 1 1 1\n" : "spacings: 1 1 1\n";
  if (options & gr::kEndian) text += (options & gr::kBigEndian) ? "endian: big\n" : "endian: little\n";
  if (options & gr::kByteSkip) text += "byte skip: " + std::to_string(skip) + "\n";
  text += (options & gr::kGzName) ? "encoding: gz\n\n" : "encoding: gzip\n\n";
  std::uint64_t claimed = static_cast<std::uint64_t>(gr::kNrrdTypeBytes[type]);
  for (const std::uint32_t s : sizes) claimed = satMul(claimed, s);
  if ((options & gr::kByteSkip) && skip > 0) claimed = satAdd(claimed, static_cast<std::uint64_t>(skip));
  std::uint32_t extra;
  std::memcpy(&extra, &in[gr::kExtraKiB], 4);
  std::uint16_t cut;
  std::memcpy(&cut, &in[gr::kCut], 2);
  return text + compress(flags, body, fillFor(flags, claimed, body.size(), extra), claimed, body, cut);
}

void readBoth(const std::string& path) {
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readHeader(path); });
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readVolume(path); });
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  splitseg::fuzz::workDir();  // the common settings (time limit, voxel cap), then this target's:
  // The budget a read may use: 256 MiB, so that inflating a lying header would show as an
  // allocation far over it. The voxel cap is raised from 16 Mi to 64 Mi so the budget, not the
  // cap, is what refuses a 48-64 Mi voxel volume.
  ::setenv("SPLITSEG_READ_MEMORY", "268435456", 1);
  ::setenv("SPLITSEG_MAX_VOXELS", "67108864", 1);
  itk::Object::GlobalWarningDisplayOff();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  const std::string body = in.size() > gr::kBody ? in.substr(gr::kBody) : std::string();
  in.resize(std::max(in.size(), gr::kBody), '\0');
  const std::string nii = niftiFile(in, body);
  readBoth(splitseg::fuzz::writeInput("in.nii.gz", reinterpret_cast<const std::uint8_t*>(nii.data()), nii.size()));
  const std::string nrrd = nrrdFile(in, body);
  readBoth(splitseg::fuzz::writeInput("in.nrrd", reinterpret_cast<const std::uint8_t*>(nrrd.data()), nrrd.size()));
  return 0;
}
