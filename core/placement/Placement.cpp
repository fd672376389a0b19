#include "core/placement/Placement.h"
#include "core/base/JsonText.h"
#include "core/base/DurableFile.h"
#include "core/base/Error.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace splitseg::placement {

namespace {
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}
std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\n");
  auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
} // namespace

std::string canonicalDevice(const std::string& device) {
  const std::string d = trim(device);
  // "r<rank>:<device>": the device of another process (a rank); the rank number stays, canonical.
  if (d.size() > 2 && d[0] == 'r' && std::isdigit(static_cast<unsigned char>(d[1]))) {
    const auto colon = d.find(':');
    const std::string digits = d.substr(1, colon == std::string::npos ? std::string::npos : colon - 1);
    if (colon == std::string::npos || digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      throw InvalidArgument("unknown device '" + device + "' (a rank's device is r<rank>:<device>, e.g. r1:cuda:0)");
    return "r" + std::to_string(std::stoi(digits)) + ":" + canonicalDevice(d.substr(colon + 1));
  }
  if (d == "cpu") return d;
  if (d == "cuda") return "cuda:0";
  if (d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
      std::all_of(d.begin() + 5, d.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return "cuda:" + std::to_string(std::stoi(d.substr(5)));
  throw InvalidArgument("unknown device '" + device + "' (cpu, cuda:0, cuda:1, ...)");
}

std::vector<std::string> splitShards(const std::string& entry) {
  std::vector<std::string> out;
  std::stringstream ss(entry);
  std::string item;
  while (std::getline(ss, item, '+')) out.push_back(trim(item));
  if (out.empty()) out.push_back(trim(entry));
  return out;
}

std::string canonicalEntry(const std::string& entry) {
  const auto parts = splitShards(entry);
  std::vector<std::string> seen;
  int ranked = 0;
  for (const auto& part : parts) {
    const std::string d = canonicalDevice(part);
    if (std::find(seen.begin(), seen.end(), d) != seen.end())
      throw InvalidArgument("device " + d + " is listed twice in '" + trim(entry) + "'; each shard needs its own device");
    ranked += splitRank(d).rank >= 0;
    seen.push_back(d);
  }
  if (ranked != 0 && ranked != static_cast<int>(seen.size()))
    throw InvalidArgument("'" + trim(entry) + "' mixes this process's devices with ranks' devices; name every shard by rank (r0:cpu+r1:cpu) or none");
  std::string out;
  for (const auto& d : seen) out += (out.empty() ? "" : "+") + d;
  return out;
}

Placement Placement::uniform(const std::vector<std::string>& stages, const std::string& device) {
  Placement p;
  p.order_ = stages;
  for (const auto& s : stages) p.assign(s, device);
  return p;
}

Placement Placement::parse(const std::string& text, const std::vector<std::string>& stages,
                           const std::string& defaultDevice) {
  const std::string t = trim(text);
  if (t.empty()) return uniform(stages, defaultDevice);
  if (t.front() == '{') return fromJson(t, stages);
  if (t.find('=') == std::string::npos) {
    if (!std::filesystem::exists(t))
      throw InvalidArgument("placement '" + t + "' is neither stage=device pairs nor an existing JSON file");
    return load(t, stages);
  }
  Placement p = uniform(stages, defaultDevice);
  std::stringstream ss(t);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InvalidArgument("placement entry '" + item + "' must be stage=device");
    p.assign(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
  }
  return p;
}

Placement Placement::fromJson(const std::string& json, const std::vector<std::string>& stages) {
  nlohmann::json j;
  try {
    j = parseJson(json, "placement");
  } catch (const JsonRefused& e) {
    throw InvalidArgument(e.what());
  }
  const nlohmann::json& m = j.contains("stages") ? j["stages"] : j;
  if (!m.is_object()) throw InvalidArgument("placement JSON must map stage names to devices");
  Placement p = uniform(stages, "cpu");
  p.map_.clear();
  p.primary_.clear();
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (std::find(stages.begin(), stages.end(), it.key()) == stages.end())
      throw InvalidArgument("placement names unknown stage '" + it.key() + "' (stages: " + joined(stages) + ")");
    if (!it.value().is_string()) throw InvalidArgument("device of stage '" + it.key() + "' must be a string");
    p.assign(it.key(), it.value().get<std::string>());
  }
  std::vector<std::string> missing;
  for (const auto& s : stages)
    if (!p.map_.count(s)) missing.push_back(s);
  if (!missing.empty()) throw InvalidArgument("placement lacks stages: " + joined(missing));
  return p;
}

std::string Placement::toJson() const {
  nlohmann::ordered_json stages;
  for (const auto& s : order_) stages[s] = map_.at(s);
  return nlohmann::ordered_json{{"stages", stages}}.dump(2);
}

void Placement::save(const std::string& path) const {
  writeFileDurably(path, toJson() + "\n");  // unique temporary, fsync, rename, fsync folder
}

Placement Placement::load(const std::string& path, const std::vector<std::string>& stages) {
  const std::string text = readJsonFile(path).dump();
  try {
    return fromJson(text, stages);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(path + ": " + e.what());
  }
}

const std::string& Placement::deviceOf(const std::string& stage) const {
  auto it = primary_.find(stage);
  if (it == primary_.end()) throw InvalidArgument("no device for unknown stage '" + stage + "'");
  return it->second;
}

const std::string& Placement::entryOf(const std::string& stage) const {
  auto it = map_.find(stage);
  if (it == map_.end()) throw InvalidArgument("no device for unknown stage '" + stage + "'");
  return it->second;
}

std::vector<std::string> Placement::shardsOf(const std::string& stage) const { return splitShards(entryOf(stage)); }

bool Placement::anySharded() const {
  for (const auto& s : order_)
    if (map_.at(s).find('+') != std::string::npos) return true;
  return false;
}

void Placement::assign(const std::string& stage, const std::string& device) {
  if (std::find(order_.begin(), order_.end(), stage) == order_.end())
    throw InvalidArgument("unknown stage '" + stage + "' (stages: " + joined(order_) + ")");
  try {
    map_[stage] = canonicalEntry(device);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("stage " + stage + ": " + e.what());
  }
  primary_[stage] = splitShards(map_[stage]).front();
}

int processRank(const std::string& device) { return std::max(0, splitRank(device).rank); }

RankDevice splitRank(const std::string& device) {
  const std::string d = canonicalDevice(device);
  if (d[0] != 'r') return {-1, d};
  const auto colon = d.find(':');
  return {std::stoi(d.substr(1, colon - 1)), d.substr(colon + 1)};
}

int Placement::rankCount() const {
  int n = 0;
  for (const auto& s : order_)
    for (const auto& d : shardsOf(s)) n = std::max(n, splitRank(d).rank + 1);
  return n;
}

int Placement::rankOf(const std::string& stage) const { return processRank(deviceOf(stage)); }

std::vector<std::string> Placement::devices() const {
  std::vector<std::string> d;
  for (const auto& s : order_)
    for (const auto& shard : shardsOf(s))
      if (std::find(d.begin(), d.end(), shard) == d.end()) d.push_back(shard);
  return d;
}

void Placement::checkDevices(const std::vector<std::string>& available) const {
  for (const auto& s : order_)
    for (const auto& d : shardsOf(s))
      if (std::find(available.begin(), available.end(), d) == available.end())
        throw DeviceError("stage " + s + " is placed on " + d + ", which is not available (available: " +
                          joined(available) + ")");
}

std::string Placement::toInline() const {
  std::string out;
  for (const auto& s : order_) out += (out.empty() ? "" : ",") + s + "=" + map_.at(s);
  return out;
}

std::string Placement::describe() const {
  std::string out;
  std::size_t i = 0;
  while (i < order_.size()) {
    std::size_t j = i;
    while (j + 1 < order_.size() && map_.at(order_[j + 1]) == map_.at(order_[i])) ++j;
    if (!out.empty()) out += " | ";
    out += order_[i] + (j > i ? ".." + order_[j] : "") + " " + map_.at(order_[i]);
    i = j + 1;
  }
  return out;
}

} // namespace splitseg::placement
