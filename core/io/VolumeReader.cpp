#include "core/io/VolumeReader.h"

#include "core/base/Error.h"
#include "core/io/DicomSeries.h"
#include "core/io/ItkConvert.h"

#include <itkImageIOFactory.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool endsWith(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

std::string formatName(const itk::ImageIOBase* io) {
  const std::string n = lower(io->GetNameOfClass());
  if (n.find("nifti") != std::string::npos) return "NIfTI";
  if (n.find("nrrd") != std::string::npos) return "NRRD";
  if (n.find("meta") != std::string::npos) return "MetaImage";
  if (n.find("gdcm") != std::string::npos) return "DICOM";
  return io->GetNameOfClass();
}

// Missing or unreadable files are IoErrors; the rest is about content.
void checkReadableFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IoError(path, "no such file or folder");
  if (!fs::is_regular_file(path, ec)) throw IoError(path, "not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(path, "cannot open for reading (permissions?)");
  if (fs::file_size(path, ec) == 0) throw FormatError(path, "empty file");
}

// Creates the ImageIO for a file and reads its header; checks dimension and components.
itk::ImageIOBase::Pointer openHeader(const std::string& path) {
  checkReadableFile(path);
  itk::ImageIOBase::Pointer io;
  try {
    io = itk::ImageIOFactory::CreateImageIO(path.c_str(), itk::IOFileModeEnum::ReadMode);
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(path, "cannot read header: " + itkMessage(e));
  }
  if (!io)
    throw FormatError(path, "not a recognised image file (expected NIfTI .nii/.nii.gz, NRRD .nrrd/.nhdr, "
                            "MetaImage .mha/.mhd, or a DICOM folder)");
  try {
    io->SetFileName(path);
    io->ReadImageInformation();
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(path, "corrupt or unreadable header: " + itkMessage(e));
  }
  const unsigned dims = io->GetNumberOfDimensions();
  std::uint64_t extra = 1;
  for (unsigned d = 3; d < dims; ++d) extra *= io->GetDimensions(d);
  if (dims < 3) throw FormatError(path, "image is " + std::to_string(dims) + "D; a 3D volume is needed");
  if (extra != 1)
    throw FormatError(path, "image is " + std::to_string(dims) + "D with " + std::to_string(extra) +
                                " volumes; a single 3D volume is needed");
  if (io->GetNumberOfComponents() != 1)
    throw FormatError(path, "image has " + std::to_string(io->GetNumberOfComponents()) +
                                " components per voxel; a scalar image is needed");
  if (pixelTypeName(io->GetComponentType()).empty())
    throw FormatError(path, "unsupported pixel type " + io->GetComponentTypeAsString(io->GetComponentType()));
  // A corrupted header can claim absurd sizes; refuse before allocating.
  double voxels = 1;
  for (unsigned d = 0; d < 3; ++d) {
    if (io->GetDimensions(d) == 0) throw FormatError(path, "size is zero along axis " + std::to_string(d));
    voxels *= static_cast<double>(io->GetDimensions(d));
  }
  if (voxels > 4.0e9) throw FormatError(path, "implausible size (" + std::to_string(voxels) + " voxels); header corrupt?");
  for (unsigned d = 0; d < 3; ++d)
    if (!(io->GetSpacing(d) > 0) || !std::isfinite(io->GetSpacing(d)))
      throw FormatError(path, "invalid spacing " + std::to_string(io->GetSpacing(d)) + " along axis " + std::to_string(d));
  return io;
}

void checkFinite(const Volume& v, const std::string& path) {
  std::int64_t bad = 0, first = -1;
  const auto& vox = v.voxels();
  for (std::size_t i = 0; i < vox.size(); ++i)
    if (!std::isfinite(vox[i])) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  if (bad == 0) return;
  const auto& s = v.size();
  const std::int64_t x = first % s[0], y = (first / s[0]) % s[1], z = first / (s[0] * s[1]);
  throw FormatError(path, std::to_string(bad) + " voxels are NaN or infinite (first at " + std::to_string(x) +
                              "," + std::to_string(y) + "," + std::to_string(z) + ")");
}

// ITK's NIfTI reader zero-fills a short file without an error, so check the length
// against the header: vox_offset + voxels * bitpix / 8 bytes (decompressed for .nii.gz).
// Float data is also scanned for NaN/Inf, which ITK would turn into zeros.
void checkNiftiComplete(const std::string& path, bool scanNonFinite) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (!f) return;
  unsigned char h[348];
  if (gzread(f, h, sizeof h) != static_cast<int>(sizeof h)) {
    gzclose(f);
    throw FormatError(path, "truncated: shorter than a NIfTI header");
  }
  std::int32_t sizeofHdr;
  std::memcpy(&sizeofHdr, h, 4);
  const bool swap = sizeofHdr != 348;
  auto i16 = [&](int off) {
    std::uint16_t v;
    std::memcpy(&v, h + off, 2);
    if (swap) v = static_cast<std::uint16_t>((v >> 8) | (v << 8));
    return static_cast<std::int16_t>(v);
  };
  std::uint32_t offBits;
  std::memcpy(&offBits, h + 108, 4);
  if (swap) offBits = __builtin_bswap32(offBits);
  float voxOffset;
  std::memcpy(&voxOffset, &offBits, 4);
  const int dims = i16(40);
  if (dims < 1 || dims > 7 || !(voxOffset >= 0)) {
    gzclose(f);
    return;  // ITK has judged the header already
  }
  std::uint64_t bytes = static_cast<std::uint64_t>(std::max<std::int16_t>(i16(72), 8)) / 8;
  for (int d = 1; d <= dims; ++d) bytes *= static_cast<std::uint64_t>(std::max<std::int16_t>(i16(40 + 2 * d), 1));
  const std::uint64_t need = static_cast<std::uint64_t>(voxOffset) + bytes;
  const int datatype = i16(70);
  if (scanNonFinite && (datatype == 16 || datatype == 64)) {
    // ITK's NIfTI reader turns NaN into 0 silently; look at the stored floats first.
    const std::size_t elem = datatype == 16 ? 4 : 8;
    // Skip to vox_offset by reading (gzseek misbehaves on uncompressed files here).
    std::vector<unsigned char> skip(static_cast<std::size_t>(std::max(0.0f, voxOffset - 348.0f)));
    if (!skip.empty() && gzread(f, skip.data(), static_cast<unsigned>(skip.size())) != static_cast<int>(skip.size())) {
      gzclose(f);
      throw FormatError(path, "truncated: ends before its voxel data");
    }
    std::vector<unsigned char> buf((1 << 20) / elem * elem);
    std::uint64_t got = 0, bad = 0, first = 0;
    int r;
    while (got < bytes && (r = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
      for (std::size_t o = 0; o + elem <= static_cast<std::size_t>(r); o += elem) {
        unsigned char e[8];
        for (std::size_t b = 0; b < elem; ++b) e[b] = buf[o + (swap ? elem - 1 - b : b)];
        double v;
        if (elem == 4) { float x; std::memcpy(&x, e, 4); v = x; } else std::memcpy(&v, e, 8);
        if (!std::isfinite(v)) {
          if (bad++ == 0) first = (got + o) / elem;
        }
      }
      got += static_cast<std::uint64_t>(r);
    }
    gzclose(f);
    if (got + static_cast<std::uint64_t>(voxOffset) < need)
      throw FormatError(path, "truncated: holds " + std::to_string(got) + " bytes of voxel data, the header needs " + std::to_string(bytes));
    if (bad) {
      const std::uint64_t nx = static_cast<std::uint64_t>(std::max<std::int16_t>(i16(42), 1)), ny = static_cast<std::uint64_t>(std::max<std::int16_t>(i16(44), 1));
      throw FormatError(path, std::to_string(bad) + " voxels are NaN or infinite (first at " + std::to_string(first % nx) + "," +
                                  std::to_string((first / nx) % ny) + "," + std::to_string(first / (nx * ny)) + ")");
    }
    return;
  }
  if (gzdirect(f) == 0) {
    // Fast path: a complete gzip member ends with its decompressed size mod 2^32.
    std::ifstream raw(path, std::ios::binary | std::ios::ate);
    unsigned char tail[4] = {0, 0, 0, 0};
    if (raw && raw.tellg() >= 4) {
      raw.seekg(-4, std::ios::end);
      raw.read(reinterpret_cast<char*>(tail), 4);
      const std::uint32_t isize = tail[0] | (tail[1] << 8) | (tail[2] << 16) | (std::uint32_t(tail[3]) << 24);
      if (raw && isize == static_cast<std::uint32_t>(need)) {
        gzclose(f);
        return;
      }
    }
  } else {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    gzclose(f);
    if (!ec && size < need)
      throw FormatError(path, "truncated: " + std::to_string(size) + " bytes, the header needs " + std::to_string(need));
    return;
  }
  std::uint64_t have = sizeof h;
  std::vector<char> buf(1 << 20);
  int r;
  while (have < need && (r = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) have += static_cast<std::uint64_t>(r);
  gzclose(f);
  if (have < need)
    throw FormatError(path, "truncated: holds " + std::to_string(have) + " bytes of image data and header, the header needs " +
                                std::to_string(need));
}

template <typename T>
void convert(const std::vector<unsigned char>& raw, float* out, std::size_t n) {
  const T* in = reinterpret_cast<const T*>(raw.data());
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

// Reads the voxels through the ImageIO into a buffer pre-filled with a byte pattern. ITK
// readers leave a truncated file's tail unwritten without an error, so a tail that still
// holds the pattern (for two different patterns) means the file ended early.
bool readRaw(itk::ImageIOBase* io, std::vector<unsigned char>& raw, unsigned char fill) {
  std::fill(raw.begin(), raw.end(), fill);
  itk::ImageIORegion region(io->GetNumberOfDimensions());
  for (unsigned d = 0; d < io->GetNumberOfDimensions(); ++d) {
    region.SetIndex(d, 0);
    region.SetSize(d, io->GetDimensions(d));
  }
  io->SetIORegion(region);
  io->Read(raw.data());
  const std::size_t tail = std::min<std::size_t>(raw.size(), 64);
  return std::all_of(raw.end() - static_cast<std::ptrdiff_t>(tail), raw.end(), [fill](unsigned char b) { return b == fill; });
}

Volume readVoxels(itk::ImageIOBase* io, const std::string& path) {
  Geometry g;
  for (unsigned i = 0; i < 3; ++i) {
    g.size[i] = static_cast<std::int64_t>(io->GetDimensions(i));
    g.spacing[i] = io->GetSpacing(i);
    g.origin[i] = io->GetOrigin(i);
    const auto axis = io->GetDirection(i);
    for (unsigned r = 0; r < 3; ++r) g.direction[r * 3 + i] = r < axis.size() ? axis[r] : (r == i);
  }
  const std::size_t n = static_cast<std::size_t>(g.voxelCount());
  Volume v;
  std::vector<unsigned char> raw;
  try {
    raw.resize(n * io->GetComponentSize());
    v = Volume(g);
    bool tailUntouched = readRaw(io, raw, 0xA5);
    if (tailUntouched) tailUntouched = readRaw(io, raw, 0x5A);
    if (tailUntouched) throw FormatError(path, "truncated: the file ends before all voxels were read");
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(path, "truncated or corrupt voxel data: " + itkMessage(e));
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "not enough memory to read the voxels (header corrupt?)");
  }
  using C = itk::IOComponentEnum;
  float* out = v.data();
  switch (io->GetComponentType()) {
    case C::UCHAR: convert<std::uint8_t>(raw, out, n); break;
    case C::CHAR: convert<std::int8_t>(raw, out, n); break;
    case C::USHORT: convert<std::uint16_t>(raw, out, n); break;
    case C::SHORT: convert<std::int16_t>(raw, out, n); break;
    case C::UINT: convert<std::uint32_t>(raw, out, n); break;
    case C::INT: convert<std::int32_t>(raw, out, n); break;
    case C::ULONG: case C::ULONGLONG: convert<std::uint64_t>(raw, out, n); break;
    case C::LONG: case C::LONGLONG: convert<std::int64_t>(raw, out, n); break;
    case C::FLOAT: convert<float>(raw, out, n); break;
    case C::DOUBLE: convert<double>(raw, out, n); break;
    default: throw FormatError(path, "unsupported pixel type");
  }
  v.setPixelType(pixelTypeName(io->GetComponentType()));
  return v;
}

} // namespace

bool isImagePath(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  const std::string p = lower(path);
  for (const char* e : {".nii", ".nii.gz", ".nrrd", ".nhdr", ".mha", ".mhd"})
    if (endsWith(p, e)) return true;
  return false;
}

ImageHeader readHeader(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // DICOM: the geometry needs every slice position; read the series.
    Volume v = readDicomSeries(path, options.dicomSeriesUid);
    return {v.geometry(), v.pixelType(), "DICOM"};
  }
  auto io = openHeader(path);
  ImageHeader h;
  for (unsigned i = 0; i < 3; ++i) {
    h.geometry.size[i] = static_cast<std::int64_t>(io->GetDimensions(i));
    h.geometry.spacing[i] = io->GetSpacing(i);
    h.geometry.origin[i] = io->GetOrigin(i);
    const auto axis = io->GetDirection(i);  // column i of the direction matrix
    for (unsigned r = 0; r < 3; ++r) h.geometry.direction[r * 3 + i] = r < axis.size() ? axis[r] : (r == i);
  }
  h.pixelType = pixelTypeName(io->GetComponentType());
  h.format = formatName(io);
  return h;
}

Volume readVolume(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  Volume v;
  if (fs::is_directory(path, ec)) {
    v = readDicomSeries(path, options.dicomSeriesUid);
  } else {
    auto io = openHeader(path);
    if (formatName(io) == "NIfTI") checkNiftiComplete(path, !options.allowNonFinite);
    v = readVoxels(io, path);
  }
  if (!options.allowNonFinite) checkFinite(v, path);
  return v;
}

} // namespace splitseg::io
