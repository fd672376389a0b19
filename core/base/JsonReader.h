#pragma once
// Typed reading of JSON that someone else wrote (after parseJson, JsonText.h), for every file
// SplitSeg reads: run descriptions, sessions, checkpoint metadata, dataset.json, summary.json.
// A refusal is one JsonFieldError line "<path>: <what is wrong>", the path spelled as in the file
// ("inference.window[1]", "schedule.stepz: unknown key"). No value is cast unchecked: nlohmann's
// get<int>() of 2e92 is undefined behaviour, of 2^40 a wrapped number.
#include "core/base/Error.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace splitseg {

// One refused field: what() is "<path>: <detail>", or the detail alone for a path "".
class JsonFieldError : public InvalidArgument {
public:
  JsonFieldError(const std::string& path, const std::string& detail);
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

private:
  std::string path_;
  std::string detail_;
};

// What an object reader does with the keys it was never asked for. SplitSeg's own files refuse
// them (a misspelt key would be dropped silently); dataset.json and summary.json carry others'.
enum class UnknownKeys { Refuse, Ignore };

// What a value holds, for the few fields that take more than one kind (a label: number or name).
enum class JsonKind { Null, Flag, WholeNumber, Number, Text, List, Object };

class JsonReader;

// One value and its path. Holds a reference: the JSON must outlive it.
class JsonField {
public:
  JsonField(const nlohmann::json& value, std::string path);

  const nlohmann::json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  JsonKind kind() const;
  // The value as JSON text, cut to 40 characters: what a message quotes.
  std::string shown() const;
  // What a message says was found: `text "fast"`, `2.5`, `a list`, `an object`, `null`.
  std::string described() const;
  [[noreturn]] void refuse(const std::string& detail) const;

  // bool, an integral type (within its range: "too large", "must not be negative"), a floating
  // point number, std::string, or nlohmann::json (any value, as it is).
  template <typename T>
  T as() const;
  // A JSON integer within lo..hi: "<shown> is not a whole number in lo..hi" otherwise.
  std::int64_t wholeIn(std::int64_t lo, std::int64_t hi) const;
  // Text turned into a value by parse (an enumeration's fromString, a device name); what parse
  // throws as InvalidArgument becomes this field's refusal.
  template <typename Parse>
  auto parsed(Parse&& parse) const;
  // Text that is one of names: "expected one of a, b, c, got text \"d\"".
  template <typename T>
  T oneOf(std::initializer_list<std::pair<const char*, T>> names) const;
  // f()'s result; an InvalidArgument it throws names this field (a JsonFieldError stays as it is).
  template <typename F>
  auto checked(F&& f) const;

  // `expected` words what a refusal says was expected ("three numbers [x, y, z]").
  const nlohmann::json& object(const char* expected = nullptr) const;
  JsonReader fields(UnknownKeys unknown = UnknownKeys::Refuse, const char* expected = nullptr) const;
  // A list's elements, paths "<path>[i]", refused outside min..max elements.
  std::vector<JsonField> elements(std::size_t min = 0, std::size_t max = kAny, const char* expected = nullptr) const;
  // An object's members in order, paths "<path>.<key>" (a map: stage -> device), at most max.
  std::vector<std::pair<std::string, JsonField>> entries(std::size_t max = kAny, const char* expected = nullptr) const;
  template <typename T>
  std::vector<T> list(std::size_t min = 0, std::size_t max = kAny, const char* expected = nullptr) const;
  template <typename T, std::size_t N>
  std::array<T, N> tuple(const char* expected = nullptr) const;

  static constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();

private:
  const nlohmann::json* value_;
  std::string path_;
};

// Reads one JSON object: keys are taken one by one; under UnknownKeys::Refuse what was never
// taken is refused when the reader goes out of scope (or at finish()). A missing or null key
// keeps the caller's default.
class JsonReader {
public:
  // "<path>: expected an object, got a list" when value is no object.
  JsonReader(const nlohmann::json& value, std::string path, UnknownKeys unknown = UnknownKeys::Refuse,
             const char* expected = nullptr);
  // A whole document: "<what>: expected a JSON object, got a list"; its keys' paths start at the top.
  static JsonReader document(const nlohmann::json& value, const std::string& what,
                             UnknownKeys unknown = UnknownKeys::Refuse);
  JsonReader(JsonReader&& other) noexcept;
  JsonReader(const JsonReader&) = delete;
  JsonReader& operator=(const JsonReader&) = delete;
  JsonReader& operator=(JsonReader&&) = delete;
  // Throws the first unknown key ("schedule.stepz: unknown key") unless an exception that began
  // after this reader is already on its way.
  ~JsonReader() noexcept(false);

  const std::string& path() const { return path_; }
  std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  void setUnknownKeys(UnknownKeys unknown) { unknown_ = unknown; }

  // The key's value; nothing when it is absent or null. Taken either way.
  std::optional<JsonField> take(const std::string& key);
  // The key's value; "<path>: missing" when it is absent or null.
  JsonField require(const std::string& key);
  // out = the key's value as T (JsonField::as); out unchanged when absent. True when read.
  template <typename T>
  bool read(const std::string& key, T& out);
  // out = parse(the key's text) (JsonField::parsed); out unchanged when absent.
  template <typename T, typename Parse>
  bool read(const std::string& key, T& out, Parse&& parse);
  template <typename T>
  T get(const std::string& key) { return require(key).as<T>(); }
  template <typename T>
  T get(const std::string& key, T fallback) {
    read(key, fallback);
    return fallback;
  }
  // The key's object (an empty one when absent), refusing or ignoring unknown keys as this one
  // does unless told.
  JsonReader sub(const std::string& key);
  JsonReader sub(const std::string& key, UnknownKeys unknown);
  // Refuses unknown keys now; the destructor then checks nothing.
  void finish();

private:
  struct Document {};
  JsonReader(Document, const nlohmann::json& value, const std::string& what, UnknownKeys unknown);

  const nlohmann::json* value_;
  std::string path_;
  UnknownKeys unknown_;
  std::set<std::string> taken_;
  int exceptionsAtStart_;
  bool checked_ = false;
};

template <typename T>
T JsonField::as() const {
  const nlohmann::json& v = *value_;
  if constexpr (std::is_same_v<T, nlohmann::json>) {
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) refuse("expected true or false, got " + described());
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) refuse("expected a whole number, got " + described());
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) refuse("too large");
      return static_cast<T>(u);
    }
    const auto x = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (x < 0) refuse("must not be negative");
      if (static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) refuse("too large");
    } else {
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) refuse("out of range");
    }
    return static_cast<T>(x);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) refuse("expected a number, got " + described());
    return v.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) refuse("expected text, got " + described());
    return v.get<std::string>();
  } else {
    static_assert(sizeof(T) == 0, "JsonField::as: unsupported type");
  }
}

template <typename F>
auto JsonField::checked(F&& f) const {
  try {
    return f();
  } catch (const JsonFieldError&) {
    throw;
  } catch (const InvalidArgument& e) {
    refuse(e.what());
  }
}

template <typename Parse>
auto JsonField::parsed(Parse&& parse) const {
  const std::string text = as<std::string>();
  return checked([&] { return parse(text); });
}

template <typename T>
T JsonField::oneOf(std::initializer_list<std::pair<const char*, T>> names) const {
  const std::string text = as<std::string>();
  std::string known;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  refuse("expected one of " + known + ", got " + described());
}

template <typename T>
std::vector<T> JsonField::list(std::size_t min, std::size_t max, const char* expected) const {
  std::vector<T> out;
  for (const auto& e : elements(min, max, expected)) out.push_back(e.as<T>());
  return out;
}

template <typename T, std::size_t N>
std::array<T, N> JsonField::tuple(const char* expected) const {
  const auto e = elements(N, N, expected);
  std::array<T, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = e[i].as<T>();
  return out;
}

template <typename T>
bool JsonReader::read(const std::string& key, T& out) {
  const auto v = take(key);
  if (v) out = v->as<T>();
  return v.has_value();
}

template <typename T, typename Parse>
bool JsonReader::read(const std::string& key, T& out, Parse&& parse) {
  const auto v = take(key);
  if (v) out = v->parsed(std::forward<Parse>(parse));
  return v.has_value();
}

} // namespace splitseg
