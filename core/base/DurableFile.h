#pragma once
// Durable, atomic replacement of files: write to a uniquely named temporary beside the target
// (mkstemp: two writers never share one), fsync it, rename it over the target, fsync the
// folder. A failure at any step removes the temporary and leaves the old file as it was.
#include <string>

namespace splitseg {

// Creates an empty, uniquely named file ".splitseg-tmp-<name>-XXXXXX" in path's folder and
// returns its path. Throws IoError naming path.
std::string makeTempFileBeside(const std::string& path);

// fsync(tmp), rename(tmp, path), fsync(folder of path). On failure removes tmp and throws
// IoError naming path.
void commitTempFile(const std::string& tmp, const std::string& path);

// Both together, for content already in memory.
void writeFileDurably(const std::string& path, const std::string& bytes);

// fsync of a file or folder by name; throws IoError naming it.
void fsyncPath(const std::string& path);

} // namespace splitseg
