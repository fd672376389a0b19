#pragma once
// Paths named inside shared files (dataset.json entries, a .mhd/.nhdr header's data file)
// are confined to the folder of the file that names them: not absolute, no '..' leaving the
// folder, and after resolving symlinks still inside it. Only regular files are opened: a FIFO
// or device would block or stream forever, so files are checked with stat() before opening.
// Paths the user passes on the command line or picks in a dialog are not confined.
#include <string>

namespace splitseg::io {

// folder/entry when entry stays inside folder (symlinks resolved); otherwise FormatError
// naming namingFile and the entry. The returned path is folder/entry, lexically normal.
std::string confinedPath(const std::string& folder, const std::string& entry, const std::string& namingFile);

// Empty when path is an existing regular file (symlinks followed); else the problem in words
// ("does not exist", "is a FIFO, not a regular file", ...).
std::string regularFileProblem(const std::string& path);

// For MetaImage (.mha/.mhd) and NRRD (.nrrd/.nhdr) headers: the data file the header names
// (ElementDataFile / data file) is confined to the header's folder and must be a regular file;
// multi-file lists and patterns are refused. Nothing happens for other files or attached data.
// Throws FormatError naming path.
void checkDetachedDataFile(const std::string& path);

} // namespace splitseg::io
