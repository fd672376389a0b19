#pragma once
// Small text helpers for the hand-read text headers (MetaImage, NRRD). Internal to core/io.
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

namespace splitseg::io::text {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

} // namespace splitseg::io::text
