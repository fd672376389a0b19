#include "core/io/VolumeReader.h"
#include "core/io/IsolatedRead.h"

#include "core/base/Error.h"
#include "core/io/DicomSeries.h"
#include "core/io/ItkConvert.h"
#include "core/io/MetaImageCheck.h"
#include "core/io/NiftiCheck.h"
#include "core/io/SafePath.h"
#include "core/volume/GeometryCheck.h"

#include <itkImageIOFactory.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

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
  const std::string problem = regularFileProblem(path);
  if (problem == "does not exist") throw IoError(path, "no such file or folder");
  if (!problem.empty()) throw IoError(path, problem);  // a FIFO would block the open below
  std::error_code ec;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(path, "cannot open for reading (permissions?)");
  if (fs::file_size(path, ec) == 0) throw FormatError(path, "empty file");
}

Geometry geometryOf(const itk::ImageIOBase* io) {
  Geometry g;
  for (unsigned i = 0; i < 3; ++i) {
    g.size[i] = static_cast<std::int64_t>(std::min<itk::SizeValueType>(io->GetDimensions(i), INT64_MAX));
    g.spacing[i] = io->GetSpacing(i);
    g.origin[i] = io->GetOrigin(i);
    const auto axis = io->GetDirection(i);  // column i of the direction matrix
    for (unsigned r = 0; r < 3; ++r) g.direction[r * 3 + i] = r < axis.size() ? axis[r] : (r == i);
  }
  return g;
}

struct Opened {
  itk::ImageIOBase::Pointer io;
  std::optional<NiftiInfo> nifti;
};

// Creates the ImageIO for a file and reads its header; checks dimension, components and the
// geometry (GeometryCheck.h). NIfTI headers and detached data files are checked before ITK
// sees them.
// What SplitSeg checks itself before any image library reads the file.
std::optional<NiftiInfo> precheck(const std::string& path) {
  checkReadableFile(path);
  auto nifti = checkNiftiHeader(path);
  checkDetachedDataFile(path);  // first: its origin/spacing messages name the axis
  checkMetaImageHeader(path);
  return nifti;
}

Opened openHeader(const std::string& path) {
  Opened opened;
  opened.nifti = precheck(path);
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
  for (unsigned d = 3; d < dims; ++d)
    if (__builtin_mul_overflow(extra, static_cast<std::uint64_t>(io->GetDimensions(d)), &extra)) extra = 0;  // never 1 by wrapping
  if (dims < 3) throw FormatError(path, "image is " + std::to_string(dims) + "D; a 3D volume is needed");
  if (extra != 1)
    throw FormatError(path, "image is " + std::to_string(dims) + "D with " + std::to_string(extra) +
                                " volumes; a single 3D volume is needed");
  if (io->GetNumberOfComponents() != 1)
    throw FormatError(path, "image has " + std::to_string(io->GetNumberOfComponents()) +
                                " components per voxel; a scalar image is needed");
  if (pixelTypeName(io->GetComponentType()).empty())
    throw FormatError(path, "unsupported pixel type " + io->GetComponentTypeAsString(io->GetComponentType()));
  // A corrupted header can claim absurd sizes or a non-finite grid; refuse before allocating.
  for (unsigned d = 0; d < 3; ++d)
    if (io->GetDimensions(d) == 0) throw FormatError(path, "size is zero along axis " + std::to_string(d));
  // Sane numbers only: what reading the voxels costs is judged by the read that does it.
  const std::string problem = geometryProblem(geometryOf(io), 1);
  if (!problem.empty()) throw FormatError(path, problem);
  opened.io = io;
  return opened;
}

// The first non-finite voxel of values[0..n) as "N voxels are NaN or infinite (first at x,y,z)".
struct NonFinite {
  std::int64_t count = 0, first = -1;
  void scan(const float* values, std::size_t n, std::int64_t offset) {
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(values[i]) && count++ == 0) first = offset + static_cast<std::int64_t>(i);
  }
  std::string text(const std::array<std::int64_t, 3>& s) const {
    const std::int64_t x = first % s[0], y = (first / s[0]) % s[1], z = first / (s[0] * s[1]);
    return std::to_string(count) + " voxels are NaN or infinite (first at " + std::to_string(x) + "," + std::to_string(y) +
           "," + std::to_string(z) + ")";
  }
};

// Bytes of raw voxels read at once, in whole xy-planes: 256 MiB, at most an eighth of what a read
// may take (ITK's NIfTI reader holds a slab twice), or SPLITSEG_READ_SLAB_BYTES (tests).
std::uint64_t slabBytes() {
  if (const char* v = std::getenv("SPLITSEG_READ_SLAB_BYTES")) {
    char* end = nullptr;
    const unsigned long long b = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0' && b > 0) return b;
  }
  return std::min<std::uint64_t>(std::uint64_t{256} << 20, readMemoryBytes() / 8);
}

// The readers that read a z-slab of the file without decoding the rest into memory: NIfTI and
// MetaImage. NRRD and single DICOM files are read whole (ITK cannot stream them).
bool readsInSlabs(itk::ImageIOBase* io) {
  const std::string f = formatName(io);
  return f == "NIfTI" || (f == "MetaImage" && io->CanStreamRead());
}

// Reads the voxels in z-slabs, converting each into floatsFor(z0, dz) (dz whole xy-planes) and
// then calling done(floats, z0, dz): at most one slab of raw bytes is held.
void readSlabs(itk::ImageIOBase* io, const std::string& path, const std::function<float*(std::int64_t, std::int64_t)>& floatsFor,
               const std::function<void(const float*, std::int64_t, std::int64_t)>& done) {
  const Geometry g = geometryOf(io);
  const std::int64_t plane = g.size[0] * g.size[1];
  const std::uint64_t planeBytes = static_cast<std::uint64_t>(plane) * io->GetComponentSize();
  const std::int64_t step =
      readsInSlabs(io) ? std::clamp<std::int64_t>(static_cast<std::int64_t>(slabBytes() / std::max<std::uint64_t>(planeBytes, 1)), 1, g.size[2])
                       : g.size[2];
  std::vector<unsigned char> raw;
  for (std::int64_t z0 = 0; z0 < g.size[2]; z0 += step) {
    const std::int64_t dz = std::min(step, g.size[2] - z0);
    itk::ImageIORegion region(io->GetNumberOfDimensions());  // axes past z have size 1 (openHeader)
    for (unsigned d = 0; d < io->GetNumberOfDimensions(); ++d) {
      region.SetIndex(d, d == 2 ? z0 : 0);
      region.SetSize(d, static_cast<itk::SizeValueType>(d == 2 ? dz : d < 2 ? g.size[d] : 1));
    }
    const std::size_t n = static_cast<std::size_t>(plane * dz);
    try {
      raw.resize(n * io->GetComponentSize());
      if (!readComplete(io, raw, &region)) throw FormatError(path, "truncated: the file ends before all voxels were read");
    } catch (const itk::ExceptionObject& e) {
      throw FormatError(path, "truncated or corrupt voxel data: " + itkMessage(e));
    } catch (const std::bad_alloc&) {
      throw FormatError(path, "not enough memory to read the voxels (header corrupt?)");
    }
    float* out = floatsFor(z0, dz);
    if (!componentsToFloat(io->GetComponentType(), raw.data(), out, n)) throw FormatError(path, "unsupported pixel type");
    done(out, z0, dz);
  }
}

void readVoxels(itk::ImageIOBase* io, const std::string& path, VoxelSink& sink, bool allowNonFinite) {
  const Geometry g = geometryOf(io);
  float* dst = sink.start(g);
  const std::int64_t plane = g.size[0] * g.size[1];
  NonFinite bad;
  readSlabs(io, path, [&](std::int64_t z0, std::int64_t) { return dst + z0 * plane; },
            [&](const float* values, std::int64_t z0, std::int64_t dz) {
              if (!allowNonFinite) bad.scan(values, static_cast<std::size_t>(plane * dz), z0 * plane);
            });
  if (bad.count > 0) throw FormatError(path, bad.text(g.size));
  sink.setPixelType(pixelTypeName(io->GetComponentType()));
}

// A single DICOM file: GDCM reads a truncated Pixel Data element as whole (zero-filled).
void checkDicomPixels(itk::ImageIOBase* io, const std::string& path) {
  if (formatName(io) != "DICOM") return;
  std::uint64_t expected = io->GetComponentSize();
  for (unsigned d = 0; d < 3; ++d) expected *= io->GetDimensions(d);
  if (const std::string cut = dicomPixelDataProblem(path, expected); !cut.empty()) throw FormatError(path, cut);
}

// The reader boundary: whatever escapes below becomes one line naming the file.
template <typename F>
auto guarded(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "not enough memory to read it (does the header claim too much?)");
  } catch (const std::length_error&) {
    throw FormatError(path, "its header claims a size this build cannot hold");
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(path, "cannot read: " + itkMessage(e));
  } catch (const std::exception& e) {
    throw FormatError(path, std::string("cannot read: ") + e.what());
  }
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
    // DICOM: the geometry needs every slice position; read the series (isolated there).
    return guarded(path, [&] {
      Volume v = readDicomSeries(path, options.dicomSeriesUid);
      return ImageHeader{v.geometry(), v.pixelType(), "DICOM"};
    });
  }
  // Our own checks here; ITK's header parsing in a child process (IsolatedRead.h).
  guarded(path, [&] { precheck(path); });
  return isolatedHeader(path, [&] {
    return guarded(path, [&] {
      const Opened o = openHeader(path);
      checkDicomPixels(o.io, path);
      return ImageHeader{geometryOf(o.io), pixelTypeName(o.io->GetComponentType()), formatName(o.io)};
    });
  });
}

VolumeSummary summarizeVolume(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const Volume v = readVolume(path, options);
    VolumeSummary out{ImageHeader{v.geometry(), v.pixelType(), "DICOM"}};
    std::tie(out.min, out.max) = v.range();
    return out;
  }
  guarded(path, [&] { precheck(path); });
  return isolatedSummary(path, [&] {
    return guarded(path, [&] {
      const Opened o = openHeader(path);
      checkDicomPixels(o.io, path);
      VolumeSummary out{ImageHeader{geometryOf(o.io), pixelTypeName(o.io->GetComponentType()), formatName(o.io)}};
      // Single-file NIfTI: streamed from the file itself, once, in constant memory (ITK reads a
      // .nii.gz region by decompressing from the start, and NaN as 0).
      const auto& size = out.header.geometry.size;
      if (o.nifti && o.nifti->singleFile && o.nifti->bytesPerVoxel > 0 &&
          o.nifti->dataBytes == static_cast<std::uint64_t>(size[0] * size[1] * size[2] * o.nifti->bytesPerVoxel)) {
        const NiftiRange r = streamNiftiRange(path, *o.nifti);
        out.min = r.min;
        out.max = r.max;
        out.nonFinite = static_cast<std::int64_t>(r.nonFinite);
        if (r.nonFinite) {
          const auto nx = static_cast<std::uint64_t>(size[0]), ny = static_cast<std::uint64_t>(size[1]);
          out.nonFiniteNote = std::to_string(r.nonFinite) + " voxels are NaN or infinite (first at " +
                              std::to_string(r.first % nx) + "," + std::to_string((r.first / nx) % ny) + "," +
                              std::to_string(r.first / (nx * ny)) + ")";
        }
        return out;
      }
      if (o.nifti) checkNiftiData(path, *o.nifti, true, &out.nonFiniteNote);
      const std::int64_t plane = out.header.geometry.size[0] * out.header.geometry.size[1];
      NonFinite bad;
      bool any = false;
      std::vector<float> slab;
      readSlabs(o.io, path,
                [&](std::int64_t, std::int64_t dz) {
                  slab.resize(static_cast<std::size_t>(plane * dz));
                  return slab.data();
                },
                [&](const float* values, std::int64_t z0, std::int64_t dz) {
                  const std::size_t n = static_cast<std::size_t>(plane * dz);
                  bad.scan(values, n, z0 * plane);
                  for (std::size_t i = 0; i < n; ++i) {
                    const float x = values[i];
                    if (!std::isfinite(x)) continue;
                    if (!any || x < out.min) out.min = x;
                    if (!any || x > out.max) out.max = x;
                    any = true;
                  }
                });
      if (bad.count > 0) {
        out.nonFinite = bad.count;
        out.nonFiniteNote = bad.text(out.header.geometry.size);
      } else if (!out.nonFiniteNote.empty()) {
        out.nonFinite = std::stoll(out.nonFiniteNote);  // "N voxels are ..."
      }
      return out;
    });
  });
}

Volume readVolume(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return guarded(path, [&] { return readDicomSeries(path, options.dicomSeriesUid); });  // whole numbers: finite
  guarded(path, [&] { precheck(path); });
  return isolatedVolume(path, [&](VoxelSink& sink) {
    guarded(path, [&] {
      const Opened o = openHeader(path);
      const std::string cost = loadCostProblem(geometryOf(o.io).voxelCount(), o.io->GetComponentSize());
      if (!cost.empty()) throw FormatError(path, cost);
      if (o.nifti) checkNiftiData(path, *o.nifti, !options.allowNonFinite);  // ITK reads NaN as 0
      checkDicomPixels(o.io, path);
      readVoxels(o.io, path, sink, options.allowNonFinite);
    });
  });
}

} // namespace splitseg::io
