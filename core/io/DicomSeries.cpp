#include "core/io/DicomSeries.h"
#include "core/io/IsolatedRead.h"

#include "core/base/DurableFile.h"
#include "core/base/Error.h"
#include "core/io/ItkConvert.h"
#include "core/io/SafePath.h"
#include "core/volume/GeometryCheck.h"

#include <itkCastImageFilter.h>
#include <itkGDCMImageIO.h>
#include <itkGDCMSeriesFileNames.h>
#include <itkImageSeriesReader.h>
#include <itkImageSeriesWriter.h>
#include <itkMetaDataObject.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <random>
#include <sstream>
#include <string_view>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

using SeriesNames = itk::GDCMSeriesFileNames;

SeriesNames::Pointer scan(const std::string& folder) {
  std::error_code ec;
  if (!fs::exists(folder, ec)) throw IoError(folder, "no such folder");
  if (!fs::is_directory(folder, ec)) throw IoError(folder, "not a folder");
  // GDCM opens every entry to see whether it is DICOM: a FIFO would block it, a device
  // stream forever. Only folders and regular files may sit in a series folder.
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.is_directory(ec)) continue;
    const std::string problem = regularFileProblem(e.path().string());
    if (!problem.empty() && problem != "does not exist")  // a dangling link: GDCM skips it
      throw FormatError(e.path().string(), problem + " (in a DICOM folder)");
  }
  auto names = SeriesNames::New();
  names->SetUseSeriesDetails(true);
  names->SetGlobalWarningDisplay(false);
  try {
    names->SetDirectory(folder);
  } catch (const itk::ExceptionObject& e) {
    throw IoError(folder, "cannot scan for DICOM files: " + itkMessage(e));
  }
  return names;
}

std::string tag(const itk::MetaDataDictionary& d, const std::string& key) {
  std::string v;
  itk::ExposeMetaData<std::string>(d, key, v);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\0')) v.pop_back();
  return v;
}

// A fresh DICOM UID under GDCM's example root; unique enough for files we create.
std::string newUid(std::mt19937_64& rng) {
  std::ostringstream s;
  s << "1.2.826.0.1.3680043.2.1125." << (rng() % 1000000000ULL) << '.' << (rng() % 1000000000ULL);
  return s.str().substr(0, 64);
}

Geometry geometryOf(const itk::ImageIOBase* io) {
  Geometry g;
  for (unsigned i = 0; i < 3; ++i) {
    g.size[i] = i < io->GetNumberOfDimensions() ? static_cast<std::int64_t>(std::min<itk::SizeValueType>(io->GetDimensions(i), INT32_MAX)) : 1;
    g.spacing[i] = i < io->GetNumberOfDimensions() ? io->GetSpacing(i) : 1.0;
    g.origin[i] = i < io->GetNumberOfDimensions() ? io->GetOrigin(i) : 0.0;
    const auto axis = i < io->GetNumberOfDimensions() ? io->GetDirection(i) : std::vector<double>{};
    for (unsigned r = 0; r < 3; ++r) g.direction[r * 3 + i] = r < axis.size() ? axis[r] : (r == i);
  }
  return g;
}

std::string num(double v) {
  std::ostringstream s;
  s << std::setprecision(10) << v;
  return s.str();
}

} // namespace

namespace {
// The file's bytes, mapped read-only (a slice or a multi-frame file is not copied into memory).
class MappedFile {
public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const char*>(p);
        size_ = static_cast<std::size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {data_ ? data_ : "", size_}; }

private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

std::uint64_t u32At(std::string_view b, std::size_t o) {
  if (o + 4 > b.size()) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(static_cast<unsigned char>(b[o])) |
         static_cast<std::uint64_t>(static_cast<unsigned char>(b[o + 1])) << 8 |
         static_cast<std::uint64_t>(static_cast<unsigned char>(b[o + 2])) << 16 |
         static_cast<std::uint64_t>(static_cast<unsigned char>(b[o + 3])) << 24;
}

// Encapsulated frames: items (FFFE,E000) with their lengths, ended by (FFFE,E0DD).
std::string fragmentsProblem(std::string_view b, std::size_t at) {
  static const std::string_view item("\xFE\xFF\x00\xE0", 4), end("\xFE\xFF\xDD\xE0", 4);
  for (;;) {
    if (at + 8 > b.size())
      return "truncated: the compressed pixel data ends at byte " + std::to_string(b.size()) + " without its end marker";
    const std::string_view tag = b.substr(at, 4);
    const std::uint64_t length = u32At(b, at + 4);
    if (tag == end) return {};
    if (tag != item) return "corrupt: the compressed pixel data holds no fragment at byte " + std::to_string(at);
    if (at + 8 + length > b.size())
      return "truncated: a compressed fragment declares " + std::to_string(length) + " bytes, the file holds " +
             std::to_string(b.size() - at - 8);
    at += 8 + static_cast<std::size_t>(length);
  }
}
} // namespace

std::string dicomPixelDataProblem(const std::string& path, std::uint64_t expectedBytes) {
  const MappedFile file(path);
  const std::string_view bytes = file.bytes();
  static const std::string_view tag("\xE0\x7F\x10\x00", 4);  // (7FE0,0010), little endian
  const auto at = bytes.rfind(tag);
  if (at == std::string_view::npos) return {};
  std::uint64_t length = 0, value = 0;
  const std::string_view vr = bytes.substr(at + 4, 2);
  if ((vr == "OB" || vr == "OW" || vr == "OD" || vr == "OF" || vr == "UN") && bytes.size() >= at + 12) {
    length = u32At(bytes, at + 8);  // explicit VR: 2 reserved bytes, then a 32-bit length
    value = at + 12;
  } else {
    length = u32At(bytes, at + 4);  // implicit VR
    value = at + 8;
  }
  if (length == 0xFFFFFFFFu) return fragmentsProblem(bytes, static_cast<std::size_t>(value));
  const std::uint64_t held = bytes.size() > value ? bytes.size() - value : 0;
  if (value + length > bytes.size())
    return "truncated: the pixel data declares " + std::to_string(length) + " bytes, the file holds " + std::to_string(held);
  if (expectedBytes > 0 && length < expectedBytes)
    return "truncated: the pixel data holds " + std::to_string(length) + " bytes, the image needs " +
           std::to_string(expectedBytes);
  return {};
}

static std::vector<DicomSeriesInfo> listDicomSeriesHere(const std::string& folder) {
  auto names = scan(folder);
  std::vector<DicomSeriesInfo> out;
  for (const auto& uid : names->GetSeriesUIDs()) {
    DicomSeriesInfo info;
    info.uid = uid;
    const auto files = names->GetFileNames(uid);
    info.sliceCount = files.size();
    if (!files.empty()) {
      auto io = itk::GDCMImageIO::New();
      try {
        io->SetFileName(files.front());
        io->ReadImageInformation();
        info.description = tag(io->GetMetaDataDictionary(), "0008|103e");
        info.modality = tag(io->GetMetaDataDictionary(), "0008|0060");
      } catch (const itk::ExceptionObject&) {
        // Listing stays useful without the description.
      }
    }
    out.push_back(std::move(info));
  }
  if (out.empty()) throw FormatError(folder, "no DICOM series found in this folder");
  return out;
}

static void readDicomSeriesHere(const std::string& folder, const std::string& seriesUid, VoxelSink& sink) {
  auto names = scan(folder);
  const auto uids = names->GetSeriesUIDs();
  if (uids.empty()) throw FormatError(folder, "no DICOM series found in this folder");
  std::string uid = seriesUid;
  if (uid.empty()) {
    if (uids.size() > 1) {
      std::string list;
      for (const auto& u : uids) list += std::string(list.empty() ? " " : "; ") + u + " (" + std::to_string(names->GetFileNames(u).size()) + " slices)";
      throw InvalidArgument(folder + ": holds " + std::to_string(uids.size()) + " DICOM series; choose one:" + list);
    }
    uid = uids.front();
  } else if (std::find(uids.begin(), uids.end(), uid) == uids.end()) {
    throw InvalidArgument(folder + ": no DICOM series " + uid);
  }
  const auto files = names->GetFileNames(uid);  // sorted by position along the normal
  if (files.size() < 2) throw FormatError(folder, "DICOM series " + uid + " has " + std::to_string(files.size()) +
                                                      " slice; a 3D volume needs at least 2");
  // Every slice header first (regular files only: a FIFO would block GDCM), each slice's grid
  // checked before ITK computes with it (a NaN direction would reach VNL's inverse).
  std::vector<itk::GDCMImageIO::Pointer> slices;
  std::int64_t nx = 0, ny = 0;
  for (const auto& f : files) {
    const std::string problem = regularFileProblem(f);
    if (!problem.empty()) throw FormatError(f, problem);
    auto io = itk::GDCMImageIO::New();
    try {
      io->SetFileName(f);
      io->ReadImageInformation();
    } catch (const itk::ExceptionObject& e) {
      throw FormatError(f, "cannot read DICOM header (truncated or corrupt): " + itkMessage(e));
    }
    const std::uint64_t sliceBytes = static_cast<std::uint64_t>(io->GetDimensions(0)) * io->GetDimensions(1) * io->GetComponentSize();
    if (const std::string cut = dicomPixelDataProblem(f, sliceBytes); !cut.empty()) throw FormatError(f, cut);
    Geometry sg = geometryOf(io);
    if (io->GetNumberOfDimensions() > 2 && io->GetDimensions(2) != 1)
      throw FormatError(f, "multi-frame DICOM files are not supported in a series");
    if (io->GetNumberOfComponents() != 1) throw FormatError(f, "DICOM slice is not a scalar image");
    sg.size[2] = 1;
    sg.spacing[2] = 1.0;  // the series gives the slice spacing
    const std::string bad = geometryProblem(sg, io->GetComponentSize() + sizeof(float));
    if (!bad.empty()) throw FormatError(f, "DICOM slice: " + bad);
    if (slices.empty()) {
      nx = sg.size[0];
      ny = sg.size[1];
    } else if (sg.size[0] != nx || sg.size[1] != ny) {
      throw FormatError(f, "DICOM slice is " + std::to_string(sg.size[0]) + "x" + std::to_string(sg.size[1]) +
                               ", the series' first slice " + std::to_string(nx) + "x" + std::to_string(ny));
    }
    slices.push_back(io);
  }
  // The series geometry (ITK's slice spacing and order), without reading voxels yet.
  auto reader = itk::ImageSeriesReader<ItkImage>::New();
  reader->SetImageIO(itk::GDCMImageIO::New());
  reader->SetFileNames(files);
  try {
    reader->UpdateOutputInformation();
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(folder, "cannot read DICOM series " + uid + ": " + itkMessage(e));
  }
  Geometry g;
  const ItkImage* info = reader->GetOutput();
  for (unsigned i = 0; i < 3; ++i) {
    g.size[i] = static_cast<std::int64_t>(info->GetLargestPossibleRegion().GetSize(i));
    g.spacing[i] = info->GetSpacing()[i];
    g.origin[i] = info->GetOrigin()[i];
    for (unsigned j = 0; j < 3; ++j) g.direction[i * 3 + j] = info->GetDirection()(i, j);
  }
  if (g.size != std::array<std::int64_t, 3>{nx, ny, static_cast<std::int64_t>(files.size())})
    throw FormatError(folder, "DICOM series " + uid + " has an inconsistent size");
  const std::string problem = geometryProblem(g, sizeof(float) + 8);
  if (!problem.empty()) throw FormatError(folder, "DICOM series " + uid + ": " + problem);
  // Voxels slice by slice; a truncated slice (GDCM reads it as if whole) is refused.
  float* dst = sink.start(g);
  const std::size_t perSlice = static_cast<std::size_t>(nx * ny);
  std::vector<unsigned char> raw;
  for (std::size_t k = 0; k < slices.size(); ++k) {
    raw.resize(perSlice * slices[k]->GetComponentSize());
    try {
      if (!readComplete(slices[k], raw)) throw FormatError(files[k], "truncated: the file ends before all pixels were read");
    } catch (const itk::ExceptionObject& e) {
      throw FormatError(files[k], "cannot read DICOM pixels (truncated or corrupt): " + itkMessage(e));
    }
    if (!componentsToFloat(slices[k]->GetComponentType(), raw.data(), dst + k * perSlice, perSlice))
      throw FormatError(files[k], "unsupported DICOM pixel type");
  }
  const auto& io = slices.front();
  std::string pixelType = pixelTypeName(io->GetComponentType());
  if (pixelType.empty()) pixelType = "float32";
  // GDCM applies rescale slope/intercept; the values are then what the type says after it.
  if (io->GetRescaleSlope() != 1.0 || std::fmod(io->GetRescaleIntercept(), 1.0) != 0.0) pixelType = "float32";
  else if (io->GetRescaleIntercept() != 0.0 && (pixelType == "uint16" || pixelType == "uint8")) pixelType = "int16";
  sink.setPixelType(pixelType);
}

// GDCM runs in a child process: Debian builds it with assert()s that abort on crafted files.
std::vector<DicomSeriesInfo> listDicomSeries(const std::string& folder) {
  return isolatedSeriesList(folder, [&] { return listDicomSeriesHere(folder); });
}

Volume readDicomSeries(const std::string& folder, const std::string& seriesUid) {
  return isolatedVolume(folder, [&](VoxelSink& sink) { readDicomSeriesHere(folder, seriesUid, sink); });
}

void writeDicomSeries(const Volume& v, const std::string& folder, const DicomWriteOptions& options) {
  std::error_code ec;
  const fs::path target(folder);
  if (fs::exists(target, ec)) throw IoError(folder, "already exists; DICOM series are written into a new folder");
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) throw IoError(folder, "parent folder " + parent.string() + " does not exist");
  const auto& g = v.geometry();
  // A unique temporary folder (mkdtemp): two writers never share or remove each other's.
  std::string pattern = (parent / (".splitseg-tmp-" + target.filename().string() + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw IoError(folder, "cannot create a temporary folder in " + parent.string());
  const fs::path tmp(buf.data());

  using Slice = itk::Image<std::int16_t, 2>;
  using Vol16 = itk::Image<std::int16_t, 3>;
  try {
    auto cast = itk::CastImageFilter<ItkImage, Vol16>::New();
    Volume rounded = v;
    for (float& x : rounded.voxels()) x = std::round(std::clamp(x, -32768.0f, 32767.0f));
    auto img = toItk(rounded);
    cast->SetInput(img);
    cast->Update();

    std::mt19937_64 rng(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    const std::string study = newUid(rng), series = newUid(rng), frame = newUid(rng);
    std::string orient;
    for (int c = 0; c < 2; ++c)
      for (int r = 0; r < 3; ++r) orient += (orient.empty() ? "" : "\\") + num(g.direction[r * 3 + c]);

    auto io = itk::GDCMImageIO::New();
    io->KeepOriginalUIDOn();  // else GDCM invents new study/series UIDs for every slice
    std::vector<itk::MetaDataDictionary> dicts;
    dicts.reserve(static_cast<std::size_t>(g.size[2]));
    std::vector<std::string> files;
    for (std::int64_t z = 0; z < g.size[2]; ++z) {
      itk::MetaDataDictionary d;
      auto set = [&d](const char* k, const std::string& val) { itk::EncapsulateMetaData<std::string>(d, k, val); };
      set("0010|0010", options.patientName);
      set("0008|0060", options.modality);
      set("0008|103e", options.seriesDescription);
      set("0020|000d", study);
      set("0020|000e", series);
      set("0020|0052", frame);
      set("0008|0018", newUid(rng));
      set("0008|0016", "1.2.840.10008.5.1.4.1.1.2");  // CT Image Storage
      set("0020|0013", std::to_string(z + 1));
      set("0020|0037", orient);
      std::string pos;
      for (int r = 0; r < 3; ++r)
        pos += (r ? "\\" : "") + num(g.origin[r] + g.direction[r * 3 + 2] * g.spacing[2] * static_cast<double>(z));
      set("0020|0032", pos);
      set("0028|0030", num(g.spacing[1]) + "\\" + num(g.spacing[0]));  // row spacing (y) \ column spacing (x)
      set("0018|0050", num(g.spacing[2]));
      set("0018|0088", num(g.spacing[2]));
      set("0028|1052", "0");
      set("0028|1053", "1");
      dicts.push_back(d);
      std::ostringstream name;
      name << std::setw(4) << std::setfill('0') << (z + 1) << ".dcm";
      files.push_back((tmp / name.str()).string());
    }
    auto writer = itk::ImageSeriesWriter<Vol16, Slice>::New();
    writer->SetInput(cast->GetOutput());
    writer->SetImageIO(io);
    writer->SetFileNames(files);
    std::vector<itk::MetaDataDictionary*> dictPtrs;
    for (auto& d : dicts) dictPtrs.push_back(&d);
    writer->SetMetaDataDictionaryArray(&dictPtrs);
    writer->Update();
  } catch (const itk::ExceptionObject& e) {
    fs::remove_all(tmp, ec);
    throw IoError(folder, "cannot write DICOM series: " + itkMessage(e));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  try {
    for (const auto& e : fs::directory_iterator(tmp)) fsyncPath(e.path().string());
    fsyncPath(tmp.string());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, target, ec);
  if (!ec) fsyncPath(parent.string());
  if (ec) {
    fs::remove_all(tmp, ec);
    throw IoError(folder, "cannot move the written series into place");
  }
}

} // namespace splitseg::io
