#include "tests/support/PhantomDataset.h"

#include "core/data/Phantom.h"
#include "core/io/VolumeWriter.h"

#include <fstream>

namespace splitseg::checks {

namespace fs = std::filesystem;

fs::path writePhantomDataset(const fs::path& root, const PhantomDatasetOptions& o) {
  fs::create_directories(root / "imagesTr");
  fs::create_directories(root / "labelsTr");
  std::string training;
  for (int i = 0; i < o.cases; ++i) {
    data::PhantomOptions po;
    po.size = o.size;
    po.spacing = o.spacing;
    po.seed = o.firstSeed + static_cast<std::uint64_t>(i);
    po.foregroundClasses = static_cast<int>(o.labels.size());
    const auto p = data::makePhantom(po);
    const std::string id = "case_" + std::to_string(i);
    const auto image = (root / "imagesTr" / (id + ".nii.gz")).string();
    if (i == o.corrupt) std::ofstream(image) << "not a NIfTI file";
    else io::writeVolume(p.image, image);
    const auto label = (root / "labelsTr" / (id + ".nii.gz")).string();
    io::writeVolume(p.label, label, {o.labelPixelType});
    training += std::string(i ? "," : "") + R"({"image":"./imagesTr/)" + id + R"(.nii.gz","label":"./labelsTr/)" + id +
                R"(.nii.gz"})";
  }
  std::string labels = R"("0":"background")";
  for (std::size_t l = 0; l < o.labels.size(); ++l) labels += ",\"" + std::to_string(l + 1) + "\":\"" + o.labels[l] + "\"";
  std::ofstream(root / "dataset.json") << R"({"name":"Toy","modality":{"0":"CT"},"labels":{)" << labels
                                       << R"(},"numTraining":)" << o.cases << R"(,"training":[)" << training << "]}";
  return root;
}

} // namespace splitseg::checks
