#pragma once
// Shared by the libFuzzer targets: each input becomes a file (the readers take paths) in a
// per-process folder; only splitseg::Error may come out of a reader, anything else (another
// exception, a crash, a sanitizer report, a hang, an allocation over -malloc_limit_mb) is a
// finding.
#include "core/base/Error.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace splitseg::fuzz {

inline std::string workDir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("splitseg-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    // Volumes over 16 Mi voxels are refused like a machine with little free memory would.
    ::setenv("SPLITSEG_MAX_VOXELS", "16777216", 1);
    // Reads run in a child (core/io/IsolatedRead.h); one that hangs is stopped well before
    // libFuzzer's own -timeout, so a hang becomes the FormatError a user gets.
    ::setenv("SPLITSEG_READ_TIMEOUT", "8", 1);
    return d.string();
  }();
  return dir;
}

inline std::string writeInput(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = workDir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

template <typename F>
void expectOnlyErrors(F&& f) {
  try {
    f();
  } catch (const splitseg::Error&) {
    // the one accepted outcome for a bad file
  }
}

} // namespace splitseg::fuzz
