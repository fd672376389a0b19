#pragma once
// DICOM series through GDCM: listing the series of a folder, reading one (slices ordered
// by position along the slice normal) and writing a volume as a series (one file a slice).
#include "core/volume/Volume.h"

#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::io {

struct DicomSeriesInfo {
  std::string uid;          // series identifier as GDCM reports it (series UID + details)
  std::string description;  // Series Description (0008,103e), may be empty
  std::string modality;     // (0008,0060)
  std::size_t sliceCount = 0;
};

// Series found in a folder (not recursive). Throws IoError when the folder is unreadable,
// FormatError when it holds no DICOM series.
std::vector<DicomSeriesInfo> listDicomSeries(const std::string& folder);

// Reads one series. seriesUid "" picks the only series; several series without a choice
// throw InvalidArgument listing them.
Volume readDicomSeries(const std::string& folder, const std::string& seriesUid = "");

// Empty when a DICOM file's Pixel Data is whole: the element's declared length (or, compressed,
// every fragment's) is in the file, and it holds at least expectedBytes (0: not checked) when
// uncompressed. Otherwise "truncated: ..." with the bytes found and expected. GDCM zero-fills a
// short tail and reports success. Empty too when no Pixel Data element is found (GDCM judges).
std::string dicomPixelDataProblem(const std::string& path, std::uint64_t expectedBytes = 0);

struct DicomWriteOptions {
  std::string modality = "CT";
  std::string seriesDescription = "SplitSeg";
  std::string patientName = "Anonymous";
};

// Writes int16 slices (rounded, clamped) named 0001.dcm... into folder (created if needed),
// with position, orientation and spacing so readers rebuild the geometry. The folder is
// filled atomically: written aside, then renamed into place; it must not already exist.
void writeDicomSeries(const Volume& volume, const std::string& folder, const DicomWriteOptions& options = {});

} // namespace splitseg::io
