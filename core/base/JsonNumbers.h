#pragma once
// Whole numbers read from JSON written by someone else. nlohmann's get<int>() casts whatever number
// it holds: a float beyond the target's range (2e92) is undefined behaviour, a large integer wraps.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

namespace splitseg {

// The value when it is a JSON integer within lo..hi; nothing for floats, other types or out of range.
inline std::optional<std::int64_t> wholeNumberIn(const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(INT64_MAX) && static_cast<std::int64_t>(u) >= lo &&
        static_cast<std::int64_t>(u) <= hi)
      return static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i >= lo && i <= hi) return i;
  }
  return std::nullopt;
}

} // namespace splitseg
