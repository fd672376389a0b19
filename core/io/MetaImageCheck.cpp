#include "core/io/MetaImageCheck.h"
#include "core/base/Error.h"
#include "core/io/HeaderText.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace splitseg::io {

namespace {
constexpr std::size_t kMaxHeader = 65536;  // MetaIO headers are a few hundred bytes
constexpr int kMaxDims = 8;

bool number(const std::string& w, double& v) {
  char* end = nullptr;
  v = std::strtod(w.c_str(), &end);
  return !w.empty() && end == w.c_str() + w.size() && std::isfinite(v);
}

bool wholeNumber(const std::string& w, long long lo, long long hi, long long& v) {
  if (w.empty() || w.size() > 19 || w.find_first_not_of("+-0123456789") != std::string::npos) return false;
  char* end = nullptr;
  v = std::strtoll(w.c_str(), &end, 10);
  return end == w.c_str() + w.size() && v >= lo && v <= hi;
}
} // namespace

void checkMetaImageHeader(const std::string& path) {
  const std::string ext = text::lower(std::filesystem::path(path).extension().string());
  if (ext != ".mha" && ext != ".mhd") return;
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // the reader reports unreadable files itself
  std::string head(kMaxHeader, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));

  // Fields MetaIO reads as arrays of NDims (or NDims^2) numbers, and as single numbers.
  static const std::set<std::string> perAxis{"dimsize", "elementspacing", "elementsize", "offset", "origin",
                                             "position", "centerofrotation"};
  static const std::set<std::string> matrix{"transformmatrix", "rotation", "orientation"};
  static const std::set<std::string> single{"headersize", "elementnumberofchannels", "id", "parentid", "elementmin",
                                            "elementmax"};
  long long dims = 0, compressed = -1;
  bool sawDataFile = false;
  std::string dataFile;
  std::istringstream lines(head);
  std::string line;
  int lineNo = 0;
  while (!sawDataFile && std::getline(lines, line)) {
    ++lineNo;
    if (text::trim(line).empty()) continue;
    const auto eq = line.find('=');
    const std::string key = eq == std::string::npos ? std::string() : text::lower(text::trim(line.substr(0, eq)));
    if (key.empty() || !std::all_of(key.begin(), key.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
      throw FormatError(path, "MetaImage header line " + std::to_string(lineNo) + " is not 'Key = Value'");
    const auto values = text::words(line.substr(eq + 1));
    if (key == "elementdatafile") {
      sawDataFile = true;
      dataFile = text::trim(line.substr(eq + 1));
    } else if (key == "compresseddatasize") {
      if (values.size() != 1 || !wholeNumber(values[0], 0, 1LL << 62, compressed))
        throw FormatError(path, "MetaImage CompressedDataSize is not a whole number of bytes");
    } else if (key == "ndims") {
      if (values.size() != 1 || !wholeNumber(values[0], 1, kMaxDims, dims))
        throw FormatError(path, "MetaImage NDims must be a whole number from 1 to " + std::to_string(kMaxDims));
    } else if (perAxis.count(key) || matrix.count(key)) {
      if (dims == 0) throw FormatError(path, "MetaImage field " + text::trim(line.substr(0, eq)) + " comes before NDims");
      const auto expected = static_cast<std::size_t>(matrix.count(key) ? dims * dims : dims);
      if (values.size() != expected)
        throw FormatError(path, "MetaImage field " + text::trim(line.substr(0, eq)) + " holds " +
                                    std::to_string(values.size()) + " values; NDims " + std::to_string(dims) +
                                    " needs " + std::to_string(expected));
      for (const auto& w : values) {
        double v = 0;
        long long n = 0;
        if (key == "dimsize" ? !wholeNumber(w, 1, 1LL << 31, n) : !number(w, v))
          throw FormatError(path, "MetaImage field " + text::trim(line.substr(0, eq)) + " holds '" + w + "', not " +
                                      (key == "dimsize" ? "a positive whole number" : "a finite number"));
      }
    } else if (single.count(key)) {
      double v = 0;
      if (values.size() != 1 || !number(values[0], v) || std::fabs(v) > 1e18)
        throw FormatError(path, "MetaImage field " + text::trim(line.substr(0, eq)) + " is not a number");
    }
  }
  if (!sawDataFile) throw FormatError(path, "MetaImage header has no ElementDataFile line within 64 KiB");
  if (dims == 0) throw FormatError(path, "MetaImage header has no NDims");
  // MetaIO allocates CompressedDataSize bytes before reading them (found by fuzz_metaimage):
  // no more than the file holding the data can give. A detached file that is not one regular
  // file here (a LIST, a pattern, missing) is left to the reader's own checks.
  if (compressed >= 0) {
    std::error_code ec;
    const bool local = text::lower(dataFile) == "local";
    const auto dataPath = local ? std::filesystem::path(path) : std::filesystem::path(path).parent_path() / dataFile;
    if (local || std::filesystem::is_regular_file(dataPath, ec)) {
      const auto bytes = std::filesystem::file_size(dataPath, ec);
      if (!ec && static_cast<unsigned long long>(compressed) > bytes)
        throw FormatError(path, "MetaImage CompressedDataSize " + std::to_string(compressed) + " is larger than the " +
                                    (local ? "file" : "data file") + " (" + std::to_string(bytes) + " bytes)");
    }
  }
}

} // namespace splitseg::io
