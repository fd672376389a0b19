#pragma once
// Training datasets on disk: the Medical Segmentation Decathlon layout (dataset.json with
// "training" image/label pairs and "labels"), the nnU-Net raw layout (imagesTr/ with
// _0000 channel suffixes, labelsTr/, dataset.json), or a plain list of image/label pairs.
// Errors name the file at fault: FormatError for inconsistent content, IoError for
// missing/unreadable files.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace splitseg::dataset {

enum class Layout { Msd, NnUnetRaw, Pairs };

struct Case {
  std::string id;
  std::vector<std::string> images;  // one file per input channel
  std::string label;
};

struct Dataset {
  std::string name;
  std::string root;                       // folder ("" for pairs)
  Layout layout = Layout::Pairs;
  std::vector<std::string> channelNames;  // modality per channel ("CT", "T2", ...)
  std::map<int, std::string> labels;      // value -> name, 0 = background
  std::vector<Case> cases;

  int foregroundClasses() const;          // highest declared label value
  int channelCount() const { return static_cast<int>(channelNames.size()); }
};

// Detects the layout of folder: nnU-Net raw when imagesTr/ holds *_0000.<ending> files,
// otherwise MSD. Checks that every listed file exists.
Dataset openDataset(const std::string& folder);

// Image/label pairs; labels default to {0 background, 1 foreground} unless given.
Dataset datasetFromPairs(const std::vector<std::pair<std::string, std::string>>& pairs,
                         std::map<int, std::string> labels = {{0, "background"}, {1, "foreground"}});

// Reads every case's headers: the channels and the label must share size and geometry.
// Throws FormatError naming both files and the difference.
void validateGeometry(const Dataset& dataset, double tolerance = 1e-4);

struct Split {
  std::vector<std::size_t> train, validation;  // indices into Dataset::cases
};
// Seeded shuffle, then round(n * validationFraction) cases for validation, keeping at
// least one training case. The same (n, fraction, seed) always gives the same split.
Split splitCases(std::size_t count, double validationFraction, std::uint64_t seed);

const char* layoutName(Layout layout);

} // namespace splitseg::dataset
