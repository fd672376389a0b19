#include "core/dataset/Dataset.h"
#include "core/base/JsonReader.h"
#include "core/base/JsonText.h"

#include "core/base/Error.h"
#include "core/io/SafePath.h"
#include "core/io/VolumeReader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

namespace fs = std::filesystem;

namespace splitseg::dataset {

namespace {

constexpr std::size_t kMaxJsonBytes = std::size_t{64} << 20;
// Label values 0..kMaxLabel: the network gets one output channel per value.
constexpr std::int64_t kMaxLabel = 255;

nlohmann::json readJson(const std::string& path) {
  const std::string problem = io::regularFileProblem(path);
  if (problem == "does not exist") throw IoError(path, "no such file");
  if (!problem.empty()) throw IoError(path, problem);  // a FIFO would block the read
  return readJsonFile(path, JsonLimits{kMaxJsonBytes});
}

// An entry of jsonPath, confined to root (no absolute paths, no escaping '..' or symlinks).
std::string resolve(const std::string& root, const std::string& rel, const std::string& jsonPath) {
  return io::confinedPath(root, rel, jsonPath);
}

// MSD/nnU-Net v1: {"0": "background", "1": "liver"}; nnU-Net v2: {"background": 0, "liver": 1}.
std::map<int, std::string> parseLabels(const std::optional<JsonField>& field, const std::string& file) {
  std::vector<std::pair<std::string, JsonField>> entries;
  if (field) entries = field->entries();
  if (entries.empty()) throw FormatError(file, "\"labels\" is missing or empty");
  const auto outOfRange = [&](const std::string& key, const std::string& value) {
    return FormatError(file, "label \"" + key + "\" has value " + value +
                                 "; label values must be 0..255 (one network output per value)");
  };
  std::map<int, std::string> labels;
  for (const auto& [key, v] : entries) {
    std::int64_t value;
    std::string name;
    if (v.kind() == JsonKind::WholeNumber) {
      try {
        value = v.wholeIn(0, kMaxLabel);
      } catch (const JsonFieldError&) {
        throw outOfRange(key, v.shown().front() == '-' ? v.shown() : "above 255");
      }
      name = key;
    } else if (v.kind() == JsonKind::Text) {
      try {
        std::size_t used = 0;
        value = std::stoll(key, &used);
        if (used != key.size()) throw std::invalid_argument("");
      } catch (const std::exception&) {
        throw FormatError(file, "label key \"" + key + "\" is not an integer");
      }
      if (value < 0 || value > kMaxLabel) throw outOfRange(key, std::to_string(value));
      name = v.as<std::string>();
    } else {
      throw FormatError(file, "label \"" + key + "\" has an unsupported value (regions are not supported)");
    }
    if (labels.count(value)) throw FormatError(file, "label value " + std::to_string(value) + " is declared twice");
    labels[static_cast<int>(value)] = name;
  }
  if (!labels.count(0)) throw FormatError(file, "labels do not declare background (0)");
  return labels;
}

// nnU-Net v2's channel_names or MSD's modality: {"0": "CT", ...}; none: one channel.
std::vector<std::string> parseChannels(JsonReader& j, const std::string& file) {
  auto c = j.take("channel_names");
  if (!c) c = j.take("modality");
  if (!c) return {"image"};
  const auto entries = c->entries();
  if (entries.empty()) throw FormatError(file, "channel_names/modality is empty or not an object");
  std::vector<std::string> names(entries.size());
  for (const auto& [key, name] : entries) {
    std::size_t i;
    try {
      i = static_cast<std::size_t>(std::stoul(key));
    } catch (const std::exception&) {
      throw FormatError(file, "channel key \"" + key + "\" is not a number");
    }
    if (i >= names.size()) throw FormatError(file, "channels are not numbered 0.." + std::to_string(names.size() - 1));
    names[i] = name.kind() == JsonKind::Text ? name.as<std::string>() : name.json().dump();
  }
  return names;
}

// numTraining is informative: checked when it is a whole number, ignored otherwise (as always).
void checkCount(JsonReader& j, std::size_t cases, const std::string& jsonPath, const std::string& listed) {
  const auto n = j.take("numTraining");
  if (n && n->kind() == JsonKind::WholeNumber && n->as<std::int64_t>() != static_cast<std::int64_t>(cases))
    throw FormatError(jsonPath, "numTraining is " + n->shown() + " but " + listed + " " + std::to_string(cases) + " cases");
}

void requireFile(const std::string& listedIn, const std::string& path, const std::string& what) {
  const std::string problem = io::regularFileProblem(path);
  if (!problem.empty()) throw FormatError(listedIn, what + " " + path + " " + problem);
}

Dataset openNnUnet(const std::string& root, JsonReader& j, const std::string& jsonPath, const std::string& ending) {
  Dataset d;
  d.root = root;
  d.layout = Layout::NnUnetRaw;
  d.name = j.get<std::string>("name", fs::path(root).filename().string());
  d.channelNames = parseChannels(j, jsonPath);
  d.labels = parseLabels(j.take("labels"), jsonPath);
  const fs::path images = fs::path(root) / "imagesTr";
  std::set<std::string> ids;
  for (const auto& e : fs::directory_iterator(images)) {
    const std::string n = e.path().filename().string();
    if (n.size() > ending.size() + 5 && n.compare(n.size() - ending.size(), ending.size(), ending) == 0) {
      const std::string stem = n.substr(0, n.size() - ending.size());
      if (std::regex_match(stem.substr(stem.size() - 5), std::regex("_[0-9]{4}"))) ids.insert(stem.substr(0, stem.size() - 5));
    }
  }
  for (const auto& id : ids) {
    Case c;
    c.id = id;
    for (std::size_t ch = 0; ch < d.channelNames.size(); ++ch) {
      char suffix[24];
      std::snprintf(suffix, sizeof suffix, "_%04zu", ch);
      c.images.push_back(resolve(root, (fs::path("imagesTr") / (id + suffix + ending)).string(), jsonPath));
      requireFile(jsonPath, c.images.back(), "case " + id + " channel " + std::to_string(ch) + ":");
    }
    c.label = resolve(root, (fs::path("labelsTr") / (id + ending)).string(), jsonPath);
    requireFile(jsonPath, c.label, "case " + id + " label:");
    d.cases.push_back(std::move(c));
  }
  checkCount(j, d.cases.size(), jsonPath, "imagesTr holds");
  return d;
}

// An MSD case's id: its image's file name without the volume ending.
std::string caseId(const std::string& image) {
  std::string id = fs::path(image).filename().string();
  for (const char* e : {".nii.gz", ".nii", ".nrrd", ".mha", ".mhd", ".nhdr"})
    if (id.size() > std::strlen(e) && id.compare(id.size() - std::strlen(e), std::strlen(e), e) == 0) {
      id.resize(id.size() - std::strlen(e));
      break;
    }
  return id;
}

Dataset openMsd(const std::string& root, JsonReader& j, const std::string& jsonPath) {
  Dataset d;
  d.root = root;
  d.layout = Layout::Msd;
  d.name = j.get<std::string>("name", fs::path(root).filename().string());
  d.channelNames = parseChannels(j, jsonPath);
  if (d.channelNames.size() != 1)
    throw FormatError(jsonPath, "MSD datasets with " + std::to_string(d.channelNames.size()) +
                                    " modalities store 4D images, which are not supported; convert to the nnU-Net raw layout");
  d.labels = parseLabels(j.take("labels"), jsonPath);
  const auto training = j.take("training");
  if (!training) throw FormatError(jsonPath, "has no \"training\" list");
  const auto entries = training->elements();
  for (std::size_t n = 1; n <= entries.size(); ++n) {
    auto t = entries[n - 1].fields(UnknownKeys::Ignore);
    const auto image = t.take("image"), label = t.take("label");
    if (!image || !label)
      throw FormatError(jsonPath, "training entry " + std::to_string(n) + " lacks an \"image\" or \"label\" path");
    Case c;
    c.images = {resolve(root, image->as<std::string>(), jsonPath)};
    c.label = resolve(root, label->as<std::string>(), jsonPath);
    c.id = caseId(c.images[0]);
    requireFile(jsonPath, c.images[0], "training entry " + std::to_string(n) + " image");
    requireFile(jsonPath, c.label, "training entry " + std::to_string(n) + " label");
    d.cases.push_back(std::move(c));
  }
  checkCount(j, entries.size(), jsonPath, "\"training\" lists");
  return d;
}

} // namespace

int Dataset::foregroundClasses() const { return labels.empty() ? 0 : labels.rbegin()->first; }

const char* layoutName(Layout l) {
  switch (l) {
    case Layout::Msd: return "MSD";
    case Layout::NnUnetRaw: return "nnU-Net raw";
    default: return "image/label pairs";
  }
}

namespace {
Dataset openParsed(const std::string& folder, JsonReader& j, const std::string& jsonPath);
}

Dataset openDataset(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw IoError(folder, "not a folder");
  const std::string jsonPath = (fs::path(folder) / "dataset.json").string();
  const nlohmann::json j = readJson(jsonPath);
  // A field of the wrong kind (a name that is an object, ...) is one line naming the file. Keys
  // SplitSeg does not use (description, licence, ...) are others' to keep.
  auto top = [&] {
    try {
      return JsonReader::document(j, jsonPath, UnknownKeys::Ignore);
    } catch (const JsonFieldError&) {
      throw FormatError(jsonPath, "is not a JSON object");
    }
  }();
  try {
    return openParsed(folder, top, jsonPath);
  } catch (const JsonFieldError& e) {
    throw FormatError(jsonPath, std::string("a field has the wrong kind: ") + e.what());
  } catch (const fs::filesystem_error& e) {
    throw IoError(folder, e.code().message());
  }
}

namespace {
Dataset openParsed(const std::string& folder, JsonReader& j, const std::string& jsonPath) {
  std::error_code ec;
  const std::string ending = j.get<std::string>("file_ending", ".nii.gz");
  bool nnunet = false;
  const fs::path images = fs::path(folder) / "imagesTr";
  if (fs::is_directory(images, ec))
    for (const auto& e : fs::directory_iterator(images)) {
      const std::string n = e.path().filename().string();
      if (n.size() > ending.size() + 5 && n.compare(n.size() - ending.size() - 5, 5 + ending.size(), "_0000" + ending) == 0) {
        nnunet = true;
        break;
      }
    }
  Dataset d = nnunet ? openNnUnet(folder, j, jsonPath, ending) : openMsd(folder, j, jsonPath);
  if (d.cases.empty()) throw FormatError(jsonPath, "lists no training cases");
  return d;
}
} // namespace

Dataset datasetFromPairs(const std::vector<std::pair<std::string, std::string>>& pairs, std::map<int, std::string> labels) {
  if (pairs.empty()) throw InvalidArgument("no image/label pairs given");
  if (!labels.count(0)) labels[0] = "background";
  for (const auto& [value, name] : labels)
    if (value < 0 || value > kMaxLabel)
      throw InvalidArgument("label " + name + " has value " + std::to_string(value) + "; label values must be 0..255");
  Dataset d;
  d.layout = Layout::Pairs;
  d.name = "pairs";
  d.channelNames = {"image"};
  d.labels = std::move(labels);
  for (const auto& [image, label] : pairs) {
    for (const auto& p : {image, label}) {
      std::error_code ec;
      if (!fs::exists(p, ec)) throw IoError(p, "no such file");
    }
    d.cases.push_back({fs::path(image).filename().string(), {image}, label});
  }
  return d;
}

void validateGeometry(const Dataset& d, double tol) {
  for (const auto& c : d.cases) {
    const io::ImageHeader label = io::readHeader(c.label);
    for (const auto& img : c.images) {
      const io::ImageHeader h = io::readHeader(img);
      const std::string diff = h.geometry.differenceTo(label.geometry, tol);
      if (!diff.empty())
        throw FormatError(c.label, "does not match image " + img + ": " + diff + " (image vs label)");
    }
  }
}

Split splitCases(std::size_t n, double fraction, std::uint64_t seed) {
  if (!(fraction >= 0 && fraction < 1)) throw InvalidArgument("validation fraction must be within [0, 1)");
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  // Own Fisher-Yates: std::shuffle's sequence differs between standard libraries.
  std::mt19937_64 rng(seed);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  std::size_t nVal = static_cast<std::size_t>(std::llround(static_cast<double>(n) * fraction));
  if (n > 0 && nVal >= n) nVal = n - 1;
  Split s;
  s.validation.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nVal));
  s.train.assign(order.begin() + static_cast<std::ptrdiff_t>(nVal), order.end());
  std::sort(s.validation.begin(), s.validation.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

} // namespace splitseg::dataset
