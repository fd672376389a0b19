#include "core/io/AtomicWrite.h"

#include "core/base/Error.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg::io {

namespace {
fs::path makeTempDir(const fs::path& parent, const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path dir = parent / (".splitseg-tmp-" + std::to_string(::getpid()) + "-" +
                             std::to_string(stamp) + "-" + std::to_string(counter++));
    std::error_code ec;
    if (fs::create_directory(dir, ec)) return dir;
    if (ec) throw IoError(path, "cannot create a temporary folder in " + parent.string() + ": " + ec.message());
  }
  throw IoError(path, "cannot create a temporary folder in " + parent.string());
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
}

} // namespace splitseg::io
