#include "core/io/AtomicWrite.h"

#include "core/base/DurableFile.h"
#include "core/base/Error.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {
// A fresh folder with a unique name (mkdtemp) beside the target: two writers never collide.
fs::path makeTempDir(const fs::path& parent, const std::string& path) {
  std::string pattern = (parent / ".splitseg-tmp-XXXXXX").string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw IoError(path, "cannot create a temporary folder in " + parent.string() + ": " + std::strerror(errno));
  return fs::path(buf.data());
}
} // namespace

void atomicWrite(const std::string& path, const std::function<void(const std::string&)>& write) {
  const fs::path target(path);
  if (target.filename().empty()) throw InvalidArgument("output path has no file name: " + path);
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) throw IoError(path, "folder " + parent.string() + " does not exist");
  const fs::path tmp = makeTempDir(parent, path);
  try {
    write((tmp / target.filename()).string());
    // Data files first, the file named like the target last: a reader that sees the
    // header also sees its data.
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(tmp)) files.push_back(e.path());
    if (files.empty()) throw IoError(path, "the writer produced no file");
    for (const auto& f : files) fsyncPath(f.string());  // durable before any becomes visible
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& f : files) {
        const bool isMain = f.filename() == target.filename();
        if ((pass == 0) == isMain) continue;
        fs::rename(f, parent / f.filename(), ec);
        if (ec) throw IoError(path, "cannot move " + f.filename().string() + " into place: " + ec.message());
      }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove_all(tmp, ec);
  fsyncPath(parent.string());  // the renames themselves
}

} // namespace splitseg::io
