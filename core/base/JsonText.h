#pragma once
// The one way SplitSeg parses JSON that someone else wrote: session files, run descriptions,
// dataset.json, summary.json, checkpoint metadata, plans files and messages between ranks.
// nlohmann's parser is iterative, but copying, comparing and printing a value recurse once per
// level: a 400 KB file nesting 200,000 arrays overflowed the stack. Depth and size are bounded
// here, before any of that runs, and a refusal is one FormatError line naming the source.
#include "core/base/Error.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace splitseg {

// A refusal: what() is "<source>: <detail>"; detail() alone, for a caller that words its own.
class JsonRefused : public FormatError {
public:
  JsonRefused(const std::string& source, const std::string& detail);
  const std::string& detail() const { return detail_; }

private:
  std::string detail_;
};

struct JsonLimits {
  std::size_t maxBytes = std::size_t{64} << 20;  // larger than any file SplitSeg writes
  int maxDepth = 64;                             // SplitSeg's own files nest at most 6 levels
};

// Throws JsonRefused(source, ...) when text is larger than limits.maxBytes, nests arrays and
// objects deeper than limits.maxDepth, or is not JSON. source names the file or the peer.
nlohmann::json parseJson(std::string_view text, const std::string& source, const JsonLimits& limits = {});

// The file's text parsed as above; IoError when it cannot be read, JsonRefused when it is over
// limits.maxBytes (checked before reading) or not acceptable JSON.
nlohmann::json readJsonFile(const std::string& path, const JsonLimits& limits = {});

} // namespace splitseg
