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
#include <optional>

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
  const std::string problem = geometryProblem(geometryOf(io), io->GetComponentSize() + sizeof(float));
  if (!problem.empty()) throw FormatError(path, problem);
  opened.io = io;
  return opened;
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

Volume readVoxels(itk::ImageIOBase* io, const std::string& path) {
  const Geometry g = geometryOf(io);
  const std::size_t n = static_cast<std::size_t>(g.voxelCount());
  Volume v;
  std::vector<unsigned char> raw;
  try {
    raw.resize(n * io->GetComponentSize());
    v = Volume(g);
    if (!readComplete(io, raw)) throw FormatError(path, "truncated: the file ends before all voxels were read");
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(path, "truncated or corrupt voxel data: " + itkMessage(e));
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "not enough memory to read the voxels (header corrupt?)");
  }
  if (!componentsToFloat(io->GetComponentType(), raw.data(), v.data(), n)) throw FormatError(path, "unsupported pixel type");
  v.setPixelType(pixelTypeName(io->GetComponentType()));
  return v;
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
      return ImageHeader{geometryOf(o.io), pixelTypeName(o.io->GetComponentType()), formatName(o.io)};
    });
  });
}

Volume readVolume(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return guarded(path, [&] {
      Volume v = readDicomSeries(path, options.dicomSeriesUid);
      if (!options.allowNonFinite) checkFinite(v, path);
      return v;
    });
  guarded(path, [&] { precheck(path); });
  return isolatedVolume(path, [&] {
    return guarded(path, [&] {
      const Opened o = openHeader(path);
      if (o.nifti) checkNiftiData(path, *o.nifti, !options.allowNonFinite);
      Volume v = readVoxels(o.io, path);
      if (!options.allowNonFinite) checkFinite(v, path);
      return v;
    });
  });
}

} // namespace splitseg::io
