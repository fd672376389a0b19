// Deep JSON (issue 50): nlohmann's parser is iterative, but copying, comparing and printing a
// value recurse once per level, so every reader parses through splitseg::parseJson
// (core/base/JsonText.h), which refuses more than 64 levels. The input goes to parseJson (with
// the default limits and with limits taken from the input), to a session file, a run
// description and a checkpoint's metadata. Only splitseg::Error may come out; a value that was
// accepted is copied, compared and printed (the recursive operations), and must nest no deeper
// than the limit it was parsed under.
#include "FuzzSupport.h"
#include "core/base/JsonText.h"
#include "core/run/CheckpointInfo.h"
#include "core/run/RunSpec.h"
#include "core/session/Session.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace {

// Levels of arrays and objects in j, counted without recursing: "[]" is 1, "[[1]]" is 2.
template <typename Json>
int depthOf(const Json& j) {
  int deepest = 0;
  std::vector<std::pair<const Json*, int>> todo{{&j, 0}};
  while (!todo.empty()) {
    const auto [v, d] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d + 1);
    for (const auto& child : *v) todo.emplace_back(&child, d + 1);
  }
  return deepest;
}

// What the rest of SplitSeg does with a parsed value: copy, compare for equality, print.
template <typename Json>
void exercise(const Json& j) {
  const Json copy = j;
  if (!(copy == j)) __builtin_trap();
  // Not operator<: on two equal nested arrays it compares each element both ways at every level,
  // 2^depth calls (63 levels of "[[...0]]" ran past libFuzzer's timeout); SplitSeg never orders
  // JSON values.
  const std::string compact = copy.dump();
  (void)j.dump(2);
  // What dump() wrote is as deep as the value, so it parses back. (Not compared: nlohmann reads
  // 1e400 as infinity and prints it as null.)
  try {
    (void)splitseg::parseJson(compact, "dump");
  } catch (const splitseg::JsonRefused&) {
    __builtin_trap();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // The default limits: accepted means at most 64 levels.
  bool accepted = false;
  splitseg::fuzz::expectOnlyErrors([&] {
    const nlohmann::json j = splitseg::parseJson(text, "input");
    accepted = true;
    if (depthOf(j) > splitseg::JsonLimits{}.maxDepth) __builtin_trap();
    exercise(j);
  });

  // Limits from the input's last two bytes: a depth of 0..79 and a size limit at, just under
  // or just over the input's size. Accepted means within both; a lower limit accepts no more.
  if (size >= 2) {
    splitseg::JsonLimits limits;
    limits.maxDepth = data[size - 1] % 80;
    limits.maxBytes = size - 1 + data[size - 2] % 3;  // size - 1, size or size + 1
    splitseg::fuzz::expectOnlyErrors([&] {
      const nlohmann::json j = splitseg::parseJson(text, "input", limits);
      if (size > limits.maxBytes || depthOf(j) > limits.maxDepth) __builtin_trap();
      if (limits.maxDepth <= splitseg::JsonLimits{}.maxDepth && !accepted) __builtin_trap();
    });
  }

  splitseg::fuzz::expectOnlyErrors([&] {
    const splitseg::run::RunSpec r = splitseg::run::RunSpec::fromText(text);
    const auto j = r.toJson();
    exercise(j);
    if (!(r == r)) __builtin_trap();
    splitseg::run::RunSpec::fromText(j.dump());  // what it writes, it reads
  });

  splitseg::fuzz::expectOnlyErrors([&] { splitseg::run::CheckpointInfo::fromMetaJson(text, "meta.json"); });

  const auto path = splitseg::fuzz::writeInput("deep.splitseg", data, size);
  splitseg::fuzz::expectOnlyErrors([&] {
    const auto loaded = splitseg::session::loadSession(path);
    const auto j = splitseg::session::toJson(loaded.session, splitseg::fuzz::workDir());
    exercise(j);
    exercise(loaded.session.view);
  });
  return 0;
}
