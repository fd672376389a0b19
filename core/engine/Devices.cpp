#include "core/engine/Devices.h"
#include "core/engine/MemoryMeter.h"

#include <thread>

namespace splitseg::engine {

std::vector<DeviceInfo> detectDevices() {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < cudaDeviceCount(); ++i) {
    const std::string name = "cuda:" + std::to_string(i);
    const DeviceMemory m = cudaMemory(name);
    out.push_back({name, cudaDeviceName(i), m.total, m.free, false});
  }
  out.push_back({"cpu", "host (" + std::to_string(std::thread::hardware_concurrency()) + " threads)",
                 hostTotalBytes(), hostAvailableBytes(), false});
  return out;
}

std::vector<std::string> runnableDeviceNames() {
  std::vector<std::string> names;
  for (const auto& d : detectDevices()) names.push_back(d.name);
  return names;
}

} // namespace splitseg::engine
