// A DICOM file, as the second slice of a series whose first slice is a valid one (so GDCM
// groups them and the series path runs), and as a folder of its own.
#include "FuzzSupport.h"
#include "core/io/DicomSeries.h"
#include "core/io/VolumeReader.h"

#include <itkObject.h>

#include <filesystem>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  itk::Object::GlobalWarningDisplayOff();
  const fs::path dir = fs::path(splitseg::fuzz::workDir()) / "series";
  static const bool seeded = [&] {
    fs::remove_all(dir);
    fs::create_directories(dir);
    return true;
  }();
  (void)seeded;
  splitseg::fuzz::writeInput("series/slice.dcm", data, size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::listDicomSeries(dir.string()); });
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readVolume(dir.string()); });
  return 0;
}
