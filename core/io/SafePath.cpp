#include "core/io/SafePath.h"
#include "core/io/HeaderText.h"

#include "core/base/Error.h"

#include <sys/stat.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {
// True when p equals root or lies below it (both absolute and normal).
bool within(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (r->empty()) continue;  // trailing separator of root
    if (q == p.end() || *r != *q) return false;
  }
  return true;
}
using text::lower;
using text::trim;
using text::words;

// Checks the data file a header names ("" = none).
void checkNamedDataFile(const std::string& header, const std::string& value) {
  const auto w = words(value);
  if (w.empty()) throw FormatError(header, "names an empty data file");
  if (lower(w[0]) == "list" || (w.size() >= 4 && w[0].find('%') != std::string::npos))
    throw FormatError(header, "names its data as a list or pattern of files, which is not supported");
  const std::string folder = fs::path(header).parent_path().string();
  const std::string file = confinedPath(folder, value, header);
  const std::string problem = regularFileProblem(file);
  if (!problem.empty()) throw FormatError(header, "data file " + value + " " + problem);
}
} // namespace

void checkDetachedDataFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // the reader reports unreadable files itself
  std::string head(65536, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const std::string ext = lower(fs::path(path).extension().string());
  std::istringstream lines(head);
  std::string line;
  if (head.rfind("NRRD", 0) == 0) {
    std::getline(lines, line);  // magic
    while (std::getline(lines, line)) {
      if (trim(line).empty()) break;  // end of the header
      if (line[0] == '#') continue;
      const auto colon = line.find(':');
      if (colon == std::string::npos || line.compare(colon, 2, ":=") == 0) continue;
      const std::string field = lower(trim(line.substr(0, colon)));
      if (field == "data file" || field == "datafile") checkNamedDataFile(path, trim(line.substr(colon + 1)));
    }
  } else if (ext == ".mha" || ext == ".mhd") {
    while (std::getline(lines, line)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = lower(trim(line.substr(0, eq)));
      // Geometry numbers are checked here, before ITK computes a matrix from them (a NaN origin
      // makes ITK fail with a misleading message, a NaN matrix can abort in VNL).
      const bool origin = key == "offset" || key == "origin" || key == "position";
      const bool spacing = key == "elementspacing" || key == "elementsize";
      const bool direction = key == "transformmatrix" || key == "rotation" || key == "orientation";
      if (origin || spacing || direction) {
        const auto values = words(line.substr(eq + 1));
        for (std::size_t i = 0; i < values.size(); ++i) {
          char* end = nullptr;
          const double v = std::strtod(values[i].c_str(), &end);
          if (end != values[i].c_str() + values[i].size() || !std::isfinite(v)) {
            const char* axis = i % 3 == 0 ? "x" : i % 3 == 1 ? "y" : "z";
            throw FormatError(path, direction ? "direction holds a non-finite or unreadable value (" + values[i] + ")"
                                              : std::string(origin ? "origin" : "spacing") + " along " + axis +
                                                    " is not a finite number (" + values[i] + ")");
          }
        }
      }
      if (key != "elementdatafile") continue;
      const std::string value = trim(line.substr(eq + 1));
      if (lower(value) != "local") checkNamedDataFile(path, value);
      break;  // the last field: binary data may follow
    }
  }
}

std::string confinedPath(const std::string& folder, const std::string& entry, const std::string& namingFile) {
  if (entry.empty()) throw FormatError(namingFile, "names an empty path");
  if (entry.find('\0') != std::string::npos) throw FormatError(namingFile, "names a path with a NUL byte");
  const fs::path e(entry);
  if (e.is_absolute())
    throw FormatError(namingFile, "names the absolute path " + entry + "; paths must be relative to its folder");
  const fs::path rel = e.lexically_normal();
  if (!rel.empty() && *rel.begin() == "..")
    throw FormatError(namingFile, "names " + entry + ", which leaves its folder");
  const fs::path base = fs::path(folder.empty() ? "." : folder);
  const fs::path joined = (base / rel).lexically_normal();
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(fs::absolute(base, ec), ec);
  if (ec) throw IoError(namingFile, "cannot resolve its folder " + base.string() + ": " + ec.message());
  const fs::path real = fs::weakly_canonical(fs::absolute(joined, ec), ec);
  if (ec) throw FormatError(namingFile, "cannot resolve " + entry + ": " + ec.message());
  if (!within(root, real))
    throw FormatError(namingFile, "names " + entry + ", which resolves (through a symlink) to " + real.string() +
                                      " outside its folder");
  return joined.string();
}

std::string regularFileProblem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return "does not exist";
    return std::string("cannot be examined: ") + std::strerror(errno);
  }
  if (S_ISREG(st.st_mode)) return {};
  if (S_ISDIR(st.st_mode)) return "is a folder, not a regular file";
  if (S_ISFIFO(st.st_mode)) return "is a FIFO, not a regular file";
  if (S_ISSOCK(st.st_mode)) return "is a socket, not a regular file";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device, not a regular file";
  return "is not a regular file";
}

} // namespace splitseg::io
