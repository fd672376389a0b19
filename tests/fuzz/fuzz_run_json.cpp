// The JSON SplitSeg reads from shared files: a run description (RunSpec), a checkpoint's
// metadata and a .splitseg session. Only splitseg::Error may come out of them.
#include "FuzzSupport.h"
#include "core/run/CheckpointInfo.h"
#include "core/run/RunSpec.h"
#include "core/session/Session.h"

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::run::CheckpointInfo::fromMetaJson(text, "meta.json"); });
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_discarded()) splitseg::fuzz::expectOnlyErrors([&] { splitseg::run::RunSpec::fromJson(json); });
  const auto path = splitseg::fuzz::writeInput("work.splitseg", data, size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::session::loadSession(path); });
  return 0;
}
