#pragma once
// What the UI knows about one stage of the open network (read once from the network so the
// widgets need no LibTorch headers).
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::ui {

struct StageInfo {
  std::string name;
  std::vector<std::string> inputs;
  std::int64_t inChannels = 0;
  std::int64_t outChannels = 0;
  int level = 0;
  std::int64_t parameters = 0;
};

} // namespace splitseg::ui
