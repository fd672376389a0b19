#pragma once
#include <cstdint>
#include <string>

namespace splitseg {

// "16GiB", "512MiB", "1.5GB", "1024" (bytes) -> bytes. Throws InvalidArgument.
std::int64_t parseBytes(const std::string& text);
// 1536 -> "1.5 KiB"
std::string formatBytes(double bytes);

} // namespace splitseg
