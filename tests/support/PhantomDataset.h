#pragma once
// A dataset in the Medical Segmentation Decathlon layout written from generated phantoms
// (imagesTr/case_N.nii.gz, labelsTr/case_N.nii.gz, dataset.json with "training"): the one
// builder of the tests that open, train on, predict or evaluate a dataset.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace splitseg::checks {

struct PhantomDatasetOptions {
  int cases = 4;
  std::array<std::int64_t, 3> size{24, 20, 16};  // x, y, z
  std::array<double, 3> spacing{1.0, 1.0, 1.5};
  std::uint64_t firstSeed = 0;                   // case i: seed firstSeed + i
  std::vector<std::string> labels{"blob"};       // names of labels 1.. (their count: the phantom's classes)
  std::string labelPixelType;                    // "" as the writer chooses, or e.g. "uint8"
  int corrupt = -1;                              // that case's image is written as no NIfTI
};

// Writes the dataset under `root` (created) and returns `root`.
std::filesystem::path writePhantomDataset(const std::filesystem::path& root, const PhantomDatasetOptions& options = {});

} // namespace splitseg::checks
