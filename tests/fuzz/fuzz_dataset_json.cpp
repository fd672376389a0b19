// dataset.json (MSD / nnU-Net v1 and v2 label styles) in a folder holding one tiny case.
#include "FuzzSupport.h"
#include "core/dataset/Dataset.h"
#include "core/io/VolumeWriter.h"

#include <filesystem>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path root = fs::path(splitseg::fuzz::workDir()) / "ds";
  static const bool made = [&] {
    fs::create_directories(root / "imagesTr");
    fs::create_directories(root / "labelsTr");
    splitseg::Geometry g;
    g.size = {4, 4, 4};
    splitseg::Volume v(g);
    splitseg::io::writeVolume(v, (root / "imagesTr/case_0.nii.gz").string());
    splitseg::io::writeVolume(v, (root / "labelsTr/case_0.nii.gz").string());
    return true;
  }();
  (void)made;
  splitseg::fuzz::writeInput("ds/dataset.json", data, size);
  splitseg::fuzz::expectOnlyErrors([&] {
    const auto d = splitseg::dataset::openDataset(root.string());
    splitseg::dataset::validateGeometry(d);
  });
  return 0;
}
