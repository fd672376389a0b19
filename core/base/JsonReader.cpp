#include "core/base/JsonReader.h"
#include "core/base/Printable.h"

#include <exception>

namespace splitseg {

JsonFieldError::JsonFieldError(const std::string& path, const std::string& detail)
    : InvalidArgument(path.empty() ? detail : path + ": " + detail), path_(printable(path)), detail_(printable(detail)) {}

JsonField::JsonField(const nlohmann::json& value, std::string path) : value_(&value), path_(std::move(path)) {}

JsonKind JsonField::kind() const {
  switch (value_->type()) {
    case nlohmann::json::value_t::boolean: return JsonKind::Flag;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return JsonKind::WholeNumber;
    case nlohmann::json::value_t::number_float: return JsonKind::Number;
    case nlohmann::json::value_t::string: return JsonKind::Text;
    case nlohmann::json::value_t::array: return JsonKind::List;
    case nlohmann::json::value_t::object: return JsonKind::Object;
    default: return JsonKind::Null;
  }
}

std::string JsonField::shown() const {
  // Replace, not throw: a value built in memory may hold bytes that are not UTF-8.
  return value_->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40);
}

std::string JsonField::described() const {
  switch (kind()) {
    case JsonKind::Text: return "text " + shown();
    case JsonKind::List: return "a list";
    case JsonKind::Object: return "an object";
    default: return shown();
  }
}

void JsonField::refuse(const std::string& detail) const { throw JsonFieldError(path_, detail); }

std::int64_t JsonField::wholeIn(std::int64_t lo, std::int64_t hi) const {
  const auto& v = *value_;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) &&
        static_cast<std::int64_t>(u) >= lo && static_cast<std::int64_t>(u) <= hi)
      return static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i >= lo && i <= hi) return i;
  }
  refuse(shown() + " is not a whole number in " + std::to_string(lo) + ".." + std::to_string(hi));
}

const nlohmann::json& JsonField::object(const char* expected) const {
  if (!value_->is_object()) refuse(std::string("expected ") + (expected ? expected : "an object") + ", got " + described());
  return *value_;
}

JsonReader JsonField::fields(UnknownKeys unknown, const char* expected) const {
  return JsonReader(*value_, path_, unknown, expected);
}

namespace {
std::string listOf(std::size_t min, std::size_t max) {
  if (min == 0 && max == JsonField::kAny) return "a list";
  if (min == max) return "a list of " + std::to_string(min) + (min == 1 ? " value" : " values");
  if (max == JsonField::kAny) return "a list of at least " + std::to_string(min) + " values";
  return "a list of " + std::to_string(min) + ".." + std::to_string(max) + " values";
}
} // namespace

std::vector<JsonField> JsonField::elements(std::size_t min, std::size_t max, const char* expected) const {
  const std::string what = expected ? expected : listOf(min, max);
  if (!value_->is_array()) refuse("expected " + what + ", got " + described());
  const std::size_t n = value_->size();
  if (n < min || n > max) refuse("expected " + what + ", got " + std::to_string(n) + (n == 1 ? " value" : " values"));
  std::vector<JsonField> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.emplace_back((*value_)[i], path_ + "[" + std::to_string(i) + "]");
  return out;
}

std::vector<std::pair<std::string, JsonField>> JsonField::entries(std::size_t max, const char* expected) const {
  const std::string what = expected ? expected
                                    : max == kAny ? std::string("an object")
                                                  : "an object of at most " + std::to_string(max) + " entries";
  if (!value_->is_object()) refuse("expected " + what + ", got " + described());
  if (value_->size() > max) refuse("expected " + what + ", got " + std::to_string(value_->size()) + " entries");
  std::vector<std::pair<std::string, JsonField>> out;
  out.reserve(value_->size());
  for (auto it = value_->begin(); it != value_->end(); ++it)
    out.emplace_back(it.key(), JsonField(it.value(), path_.empty() ? it.key() : path_ + "." + it.key()));
  return out;
}

JsonReader::JsonReader(const nlohmann::json& value, std::string path, UnknownKeys unknown, const char* expected)
    : value_(&value), path_(std::move(path)), unknown_(unknown), exceptionsAtStart_(std::uncaught_exceptions()) {
  if (!value.is_object())
    JsonField(value, path_).refuse(std::string("expected ") + (expected ? expected : "an object") + ", got " +
                                   JsonField(value, path_).described());
}

JsonReader::JsonReader(Document, const nlohmann::json& value, const std::string& what, UnknownKeys unknown)
    : value_(&value), unknown_(unknown), exceptionsAtStart_(std::uncaught_exceptions()) {
  if (!value.is_object()) JsonField(value, what).refuse("expected a JSON object, got " + JsonField(value, what).described());
}

JsonReader JsonReader::document(const nlohmann::json& value, const std::string& what, UnknownKeys unknown) {
  return JsonReader(Document{}, value, what, unknown);
}

JsonReader::JsonReader(JsonReader&& other) noexcept
    : value_(other.value_),
      path_(std::move(other.path_)),
      unknown_(other.unknown_),
      taken_(std::move(other.taken_)),
      exceptionsAtStart_(other.exceptionsAtStart_),
      checked_(other.checked_) {
  other.checked_ = true;
}

JsonReader::~JsonReader() noexcept(false) {
  if (checked_ || std::uncaught_exceptions() > exceptionsAtStart_) return;
  finish();
}

void JsonReader::finish() {
  checked_ = true;
  if (unknown_ == UnknownKeys::Ignore) return;
  for (auto it = value_->begin(); it != value_->end(); ++it)
    if (!taken_.count(it.key())) throw JsonFieldError(field(it.key()), "unknown key");
}

std::optional<JsonField> JsonReader::take(const std::string& key) {
  taken_.insert(key);
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonField(*it, field(key));
}

JsonField JsonReader::require(const std::string& key) {
  if (auto v = take(key)) return *v;
  throw JsonFieldError(field(key), "missing");
}

JsonReader JsonReader::sub(const std::string& key) { return sub(key, unknown_); }

JsonReader JsonReader::sub(const std::string& key, UnknownKeys unknown) {
  static const nlohmann::json empty = nlohmann::json::object();
  const auto v = take(key);
  return JsonReader(v ? v->json() : empty, field(key), unknown);
}

} // namespace splitseg
