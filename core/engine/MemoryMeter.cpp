#include "core/engine/MemoryMeter.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/cuda.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#define SPLITSEG_HAS_CUDA 1
#endif

#include <fstream>
#include <sstream>
#include <unistd.h>

namespace splitseg::engine {

bool CpuMemoryCounter::record(std::int64_t delta) {
  const std::int64_t now = allocated_.fetch_add(delta) + delta;
  std::int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  const bool ok = budget_ <= 0 || now + held_ <= budget_;
  if (!ok) exceeded_ = true;
  return ok;
}

namespace {
// Receives every allocation LibTorch reports on threads that carry this debug info
// (autograd worker threads inherit it).
class Reporter final : public c10::MemoryReportingInfoBase {
public:
  explicit Reporter(CpuMemoryCounter& counter) : counter_(counter) {}
  void reportMemoryUsage(void*, int64_t size, size_t, size_t, c10::Device device) override {
    if (device.is_cpu()) counter_.record(size);
  }
  bool memoryProfilingEnabled() const override { return true; }
  CpuMemoryCounter& counter() const { return counter_; }

private:
  CpuMemoryCounter& counter_;
};
} // namespace

struct CpuMemoryScope::Impl {
  explicit Impl(CpuMemoryCounter& c)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<Reporter>(c)) {}
  c10::DebugInfoGuard guard;
};

CpuMemoryCounter* activeCpuMemoryCounter() {
  auto* reporter = dynamic_cast<Reporter*>(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE));
  return reporter ? &reporter->counter() : nullptr;
}

CpuMemoryScope::CpuMemoryScope(CpuMemoryCounter& counter) : impl_(std::make_unique<Impl>(counter)) {}
CpuMemoryScope::~CpuMemoryScope() = default;

std::int64_t processRssBytes() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  if (!(in >> pages >> resident)) return 0;
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

namespace {
std::int64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream s(line.substr(key.size() + 1));
      std::int64_t kb = 0;
      s >> kb;
      return kb * 1024;
    }
  }
  return 0;
}
} // namespace

std::int64_t hostTotalBytes() { return meminfo("MemTotal"); }
std::int64_t hostAvailableBytes() { return meminfo("MemAvailable"); }

bool cudaAvailable() { return torch::cuda::is_available(); }
int cudaDeviceCount() { return cudaAvailable() ? static_cast<int>(torch::cuda::device_count()) : 0; }

namespace {
int cudaIndex(const std::string& device) {
  auto colon = device.find(':');
  return colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
}
} // namespace

DeviceMemory cudaMemory(const std::string& device) {
  DeviceMemory m;
  m.device = device;
#ifdef SPLITSEG_HAS_CUDA
  if (!cudaAvailable()) return m;
  const int index = cudaIndex(device);
  if (index >= cudaDeviceCount()) return m;
  using c10::CachingAllocator::StatType;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  const auto agg = static_cast<std::size_t>(StatType::AGGREGATE);
  m.allocated = stats.allocated_bytes[agg].current;
  m.peak = stats.allocated_bytes[agg].peak;
  m.reserved = stats.reserved_bytes[agg].current;
  m.reservedPeak = stats.reserved_bytes[agg].peak;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(index);
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess) {
    m.free = static_cast<std::int64_t>(freeBytes);
    m.total = static_cast<std::int64_t>(totalBytes);
  }
  cudaSetDevice(previous);
#endif
  return m;
}

void cudaResetPeak(const std::string& device) {
#ifdef SPLITSEG_HAS_CUDA
  if (!cudaAvailable()) return;
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(cudaIndex(device)));
#else
  (void)device;
#endif
}

std::string cudaDeviceName(int index) {
#ifdef SPLITSEG_HAS_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) return prop.name;
#endif
  return "CUDA device " + std::to_string(index);
}

MemoryMeter::MemoryMeter(std::vector<std::string> devices) : devices_(std::move(devices)) {}

void MemoryMeter::resetPeaks() {
  cpu_.resetPeak();
  for (const auto& d : devices_)
    if (d != "cpu") cudaResetPeak(d);
}

std::vector<DeviceMemory> MemoryMeter::read() const {
  std::vector<DeviceMemory> out;
  for (const auto& d : devices_) {
    if (d == "cpu") {
      DeviceMemory m;
      m.device = d;
      m.allocated = cpu_.allocated();
      m.reserved = m.allocated;
      m.peak = cpu_.peak();
      m.reservedPeak = m.peak;
      m.total = hostTotalBytes();
      m.free = hostAvailableBytes();
      out.push_back(m);
    } else {
      out.push_back(cudaMemory(d));
    }
  }
  return out;
}

} // namespace splitseg::engine
