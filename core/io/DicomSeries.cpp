#include "core/io/DicomSeries.h"

#include "core/base/Error.h"
#include "core/io/ItkConvert.h"

#include <itkCastImageFilter.h>
#include <itkGDCMImageIO.h>
#include <itkGDCMSeriesFileNames.h>
#include <itkImageSeriesReader.h>
#include <itkImageSeriesWriter.h>
#include <itkMetaDataObject.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <random>
#include <sstream>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {

using SeriesNames = itk::GDCMSeriesFileNames;

SeriesNames::Pointer scan(const std::string& folder) {
  std::error_code ec;
  if (!fs::exists(folder, ec)) throw IoError(folder, "no such folder");
  if (!fs::is_directory(folder, ec)) throw IoError(folder, "not a folder");
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

std::string num(double v) {
  std::ostringstream s;
  s << std::setprecision(10) << v;
  return s.str();
}

} // namespace

std::vector<DicomSeriesInfo> listDicomSeries(const std::string& folder) {
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

Volume readDicomSeries(const std::string& folder, const std::string& seriesUid) {
  auto names = scan(folder);
  const auto uids = names->GetSeriesUIDs();
  if (uids.empty()) throw FormatError(folder, "no DICOM series found in this folder");
  std::string uid = seriesUid;
  if (uid.empty()) {
    if (uids.size() > 1) {
      std::string list;
      for (const auto& u : uids) list += "\n  " + u + " (" + std::to_string(names->GetFileNames(u).size()) + " slices)";
      throw InvalidArgument(folder + ": holds " + std::to_string(uids.size()) + " DICOM series; choose one:" + list);
    }
    uid = uids.front();
  } else if (std::find(uids.begin(), uids.end(), uid) == uids.end()) {
    throw InvalidArgument(folder + ": no DICOM series " + uid);
  }
  const auto files = names->GetFileNames(uid);  // sorted by position along the normal
  if (files.size() < 2) throw FormatError(folder, "DICOM series " + uid + " has " + std::to_string(files.size()) +
                                                      " slice; a 3D volume needs at least 2");
  auto io = itk::GDCMImageIO::New();
  auto reader = itk::ImageSeriesReader<ItkImage>::New();
  reader->SetImageIO(io);
  reader->SetFileNames(files);
  try {
    reader->Update();
  } catch (const itk::ExceptionObject& e) {
    throw FormatError(folder, "cannot read DICOM series " + uid + ": " + itkMessage(e));
  }
  std::string pixelType = pixelTypeName(io->GetComponentType());
  if (pixelType.empty()) pixelType = "float32";
  // GDCM applies rescale slope/intercept; the values are then what the type says after it.
  if (io->GetRescaleSlope() != 1.0 || std::fmod(io->GetRescaleIntercept(), 1.0) != 0.0) pixelType = "float32";
  else if (io->GetRescaleIntercept() != 0.0 && (pixelType == "uint16" || pixelType == "uint8")) pixelType = "int16";
  return fromItk(reader->GetOutput(), pixelType);
}

void writeDicomSeries(const Volume& v, const std::string& folder, const DicomWriteOptions& options) {
  std::error_code ec;
  const fs::path target(folder);
  if (fs::exists(target, ec)) throw IoError(folder, "already exists; DICOM series are written into a new folder");
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec)) throw IoError(folder, "parent folder " + parent.string() + " does not exist");
  const auto& g = v.geometry();
  const fs::path tmp = parent / (".splitseg-tmp-" + target.filename().string());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) throw IoError(folder, "cannot create " + tmp.string() + ": " + ec.message());

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
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    throw IoError(folder, "cannot move the written series into place");
  }
}

} // namespace splitseg::io
