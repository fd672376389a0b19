#include "core/dataset/DatasetSource.h"

#include "core/base/Error.h"
#include "core/io/VolumeReader.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>

namespace splitseg::dataset {

std::size_t PreparedCase::bytes() const {
  std::size_t b = whole.label.voxels().size() * sizeof(float);
  for (const auto& c : whole.channels) b += c.voxels().size() * sizeof(float);
  for (const auto& l : foreground.perClass) b += l.size() * sizeof(std::int64_t);
  return b;
}

DatasetSource::DatasetSource(Dataset dataset, DatasetSourceOptions options)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      split_(splitCases(dataset_.cases.size(), options_.validationFraction, options_.splitSeed)),
      sampler_(options_.sampler),
      cache_(options_.cacheBytes, [](const PreparedCase& c) { return c.bytes(); }) {
  if (dataset_.cases.empty()) throw InvalidArgument("dataset " + dataset_.name + " has no cases");
  if (options_.checkGeometryUpfront) validateGeometry(dataset_);
}

PreparedCase DatasetSource::load(std::size_t index) const {
  const Case& c = dataset_.cases.at(index);
  Volume label = io::readVolume(c.label);
  // Labels must be whole numbers the dataset declares; anything else is a broken file. A value
  // that is not a whole number (or lies outside int) is refused first, named with its voxel, and
  // never cast to int (that cast is undefined behaviour for huge floats, NaN and Inf).
  const auto& vox = label.voxels();
  for (std::size_t i = 0; i < vox.size(); ++i) {
    const double v = vox[i];
    const bool whole = std::isfinite(v) && std::floor(v) == v;
    if (whole && v >= -2147483648.0 && v < 2147483648.0) continue;
    const auto& n = label.size();
    const auto x = static_cast<std::int64_t>(i) % n[0], y = static_cast<std::int64_t>(i) / n[0] % n[1],
               z = static_cast<std::int64_t>(i) / (n[0] * n[1]);
    char text[64];
    const auto end = std::to_chars(text, text + sizeof text, vox[i]).ptr;  // shortest exact form
    std::ostringstream s;
    s << "label value " << std::string(text, end) << " at voxel (" << x << ',' << y << ',' << z << ") ";
    if (whole)
      s << "is a whole number outside the range of label values (labels hold whole numbers from -2147483648 to 2147483647";
    else
      s << "is not a whole number (labels hold whole numbers";
    s << "; this file stores " << label.pixelType() << ')';
    throw FormatError(c.label, s.str());
  }
  std::set<int> bad;
  for (float v : vox) {
    const int r = static_cast<int>(v);  // whole and within int: checked above
    if (!dataset_.labels.count(r)) {
      bad.insert(r);
      if (bad.size() >= 5) break;
    }
  }
  if (!bad.empty()) {
    std::ostringstream s;
    s << "holds label values not declared in the dataset (";
    for (auto it = bad.begin(); it != bad.end(); ++it) s << (it == bad.begin() ? "" : ", ") << *it;
    s << "); declared:";
    for (const auto& [v, n] : dataset_.labels) s << ' ' << v << " (" << n << ")";
    throw FormatError(c.label, s.str());
  }
  PreparedCase p;
  for (const auto& img : c.images) {
    Volume v = io::readVolume(img);  // NaN/Inf are a FormatError naming img
    const std::string diff = v.geometry().differenceTo(label.geometry());
    if (!diff.empty()) throw FormatError(c.label, "does not match image " + img + ": " + diff + " (image vs label)");
    p.whole.channels.push_back(options_.preprocessing.applyToImage(v));
  }
  p.whole.label = options_.preprocessing.applyToLabel(label);
  p.foreground = sampler_.indexForeground(p.whole.label, dataset_.foregroundClasses(), index);
  return p;
}

std::shared_ptr<const PreparedCase> DatasetSource::prepared(std::size_t index) {
  return cache_.get(index, [this, index] { return load(index); });
}

data::Sample DatasetSource::next(const std::array<std::int64_t, 3>& patch, std::mt19937_64& rng) {
  const auto& pool = split_.train;
  const std::size_t index = pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)];
  const auto c = prepared(index);
  data::Sample s = sampler_.sample(c->whole, c->foreground, patch, rng);
  data::augment(s, options_.augment, rng);
  return s;
}

std::vector<data::Sample> DatasetSource::validation(const std::array<std::int64_t, 3>& patch) {
  // Fixed patches: the same validation set at every evaluation, independent of training draws.
  std::vector<data::Sample> out;
  for (std::size_t index : split_.validation) {
    std::mt19937_64 rng(0x5EED0000ULL + index);
    const auto c = prepared(index);
    for (int k = 0; k < options_.validationPatchesPerCase; ++k) out.push_back(sampler_.sample(c->whole, c->foreground, patch, rng));
  }
  return out;
}

std::string DatasetSource::describe() const {
  std::ostringstream s;
  s << layoutName(dataset_.layout) << " dataset " << dataset_.name << ": " << dataset_.cases.size() << " cases ("
    << split_.train.size() << " train, " << split_.validation.size() << " validation), " << channelCount()
    << " channel(s), " << foregroundClasses() << " foreground class(es)";
  return s.str();
}

} // namespace splitseg::dataset
