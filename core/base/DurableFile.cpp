#include "core/base/DurableFile.h"

#include "core/base/Error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace splitseg {

namespace {
std::string folderOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string errnoText() { return std::strerror(errno); }
} // namespace

void fsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path, "cannot open to sync: " + errnoText());
  const int r = ::fsync(fd);
  const std::string why = r != 0 ? errnoText() : "";
  ::close(fd);
  // Some file systems cannot sync a folder (EINVAL); the data itself was synced.
  if (r != 0 && why != std::strerror(EINVAL)) throw IoError(path, "cannot sync to disk: " + why);
}

std::string makeTempFileBeside(const std::string& path) {
  const fs::path target(path);
  if (target.filename().empty()) throw InvalidArgument("output path has no file name: " + path);
  std::string pattern = (fs::path(folderOf(path)) / (".splitseg-tmp-" + target.filename().string() + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const int fd = ::mkstemp(buf.data());
  if (fd < 0) throw IoError(path, "cannot create a temporary file in " + folderOf(path) + ": " + errnoText());
  ::close(fd);
  return std::string(buf.data());
}

void commitTempFile(const std::string& tmp, const std::string& path) {
  try {
    fsyncPath(tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw IoError(path, "cannot move the written file into place: " + errnoText());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsyncPath(folderOf(path));
}

void writeFileDurably(const std::string& path, const std::string& bytes) {
  const std::string tmp = makeTempFileBeside(path);
  try {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) throw IoError(path, "cannot write: " + errnoText());
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const std::string why = errnoText();
        ::close(fd);
        throw IoError(path, "cannot write: " + why);
      }
      done += static_cast<std::size_t>(w);
    }
    if (::close(fd) != 0) throw IoError(path, "cannot write: " + errnoText());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  commitTempFile(tmp, path);
}

} // namespace splitseg
