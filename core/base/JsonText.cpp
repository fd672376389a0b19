#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"
#include "core/base/Units.h"

#include <filesystem>
#include <fstream>

namespace splitseg {

JsonRefused::JsonRefused(const std::string& source, const std::string& detail)
    : FormatError(source, detail), detail_(printable(detail)) {}

namespace {

// Thrown from the parser's callback; nlohmann passes it through and frees what it had built
// (its destructor is iterative).
struct TooDeep {};

std::string wholeMiB(std::size_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : formatBytes(static_cast<double>(bytes));
}

void checkSize(std::size_t bytes, const std::string& source, const JsonLimits& limits) {
  if (bytes > limits.maxBytes)
    throw JsonRefused(source, "is " + formatBytes(static_cast<double>(bytes)) + ", larger than " + wholeMiB(limits.maxBytes) +
                                  " of JSON; refused");
}

} // namespace

nlohmann::json parseJson(std::string_view text, const std::string& source, const JsonLimits& limits) {
  checkSize(text.size(), source, limits);
  const int maxDepth = limits.maxDepth;
  // depth is the number of open arrays and objects around the one that starts.
  const nlohmann::json::parser_callback_t limitDepth = [maxDepth](int depth, nlohmann::json::parse_event_t event,
                                                                  nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= maxDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limitDepth);
  } catch (const TooDeep&) {
    throw JsonRefused(source, "nests JSON arrays and objects deeper than " + std::to_string(maxDepth) +
                                  " levels; refused");
  } catch (const nlohmann::json::exception& e) {
    throw JsonRefused(source, std::string("is not valid JSON: ") + e.what());
  }
}

nlohmann::json readJsonFile(const std::string& path, const JsonLimits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw IoError(path, "no such file");
  if (fs::is_directory(status)) throw IoError(path, "is a folder, not a JSON file");
  if (!fs::is_regular_file(status)) throw IoError(path, "is not a regular file (a FIFO or device would block)");
  checkSize(static_cast<std::size_t>(fs::file_size(path, ec)), path, limits);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, "cannot open for reading (permissions?)");
  // In pieces, never past one byte more than allowed: a file that grew since is still bounded.
  std::string text;
  char piece[1 << 16];
  while (in && text.size() <= limits.maxBytes) {
    in.read(piece, sizeof piece);
    text.append(piece, static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError(path, "cannot read");
  return parseJson(text, path, limits);
}

} // namespace splitseg
