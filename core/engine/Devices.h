#pragma once
// The devices LibTorch can run on here, with their memory.
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::engine {

struct DeviceInfo {
  std::string name;          // "cpu", "cuda:0"
  std::string description;   // "NVIDIA H200", "host (2 threads)"
  std::int64_t totalBytes = 0;
  std::int64_t freeBytes = 0;
  bool planningOnly = false; // added by the user for what-if planning; cannot run anything
};

std::vector<DeviceInfo> detectDevices();
std::vector<std::string> runnableDeviceNames();

} // namespace splitseg::engine
