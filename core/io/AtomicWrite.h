#pragma once
// Atomic file writes. Formats like .mhd/.nhdr write a header plus a data file, so the
// writer runs inside a fresh temporary folder beside the target and every file it made is
// renamed into place afterwards (data first, header last). Every file is fsync'd before its
// rename and the folder after them. On failure nothing remains.
#include <functional>
#include <string>

namespace splitseg::io {

// Calls write(tempPath) where tempPath has the same file name as path; then moves the
// result into place. Rethrows what write throws (after cleaning up); rename failures
// throw IoError naming path.
void atomicWrite(const std::string& path, const std::function<void(const std::string& tempPath)>& write);

} // namespace splitseg::io
