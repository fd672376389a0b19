#include "core/engine/Devices.h"
#include "core/base/Error.h"
#include "core/placement/Placement.h"
#include "core/engine/MemoryMeter.h"

#include <c10/util/Exception.h>
#include <torch/torch.h>
#include <torch/version.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#define SPLITSEG_HAS_CUDA 1
#endif

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace splitseg::engine {

bool Version::operator<(const Version& o) const {
  if (major != o.major) return major < o.major;
  if (minor != o.minor) return minor < o.minor;
  return patch < o.patch;
}

std::string Version::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Version cudnnVersionFromInt(long v) {
  if (v >= 90000) return {static_cast<int>(v / 10000), static_cast<int>(v % 10000 / 100), static_cast<int>(v % 100)};
  return {static_cast<int>(v / 1000), static_cast<int>(v % 1000 / 100), static_cast<int>(v % 100)};
}

Version parseVersion(const std::string& text) {
  Version v;
  int* parts[3] = {&v.major, &v.minor, &v.patch};
  std::size_t pos = 0;
  for (int i = 0; i < 3 && pos < text.size(); ++i) {
    std::size_t used = 0;
    try {
      *parts[i] = std::stoi(text.substr(pos), &used);
    } catch (const std::exception&) {
      break;
    }
    pos += used;
    if (pos >= text.size() || text[pos] != '.') break;
    ++pos;
  }
  return v;
}

std::vector<std::string> conv3dVersionWarnings(const Version& torch, const Version& cudnn) {
  std::vector<std::string> out;
  if (torch.major == 2 && torch.minor == 9 && cudnn < Version{9, 15, 0})
    out.push_back("torch " + torch.str() + " with cuDNN " + cudnn.str() +
                  ": torch 2.9.x disables cuDNN for 3D convolutions before cuDNN 9.15 (slower fallback kernels, "
                  "far more memory); use cuDNN >= 9.15 or another torch");
  if (!(cudnn < Version{9, 8, 0}) && cudnn < Version{9, 11, 0})
    out.push_back("cuDNN " + cudnn.str() +
                  ": bf16 3D convolutions give wrong results with cuDNN 9.8-9.10; keep CUDA stages in fp32 "
                  "or use another cuDNN");
  return out;
}

std::vector<std::string> cudnnWarnings() {
#ifdef SPLITSEG_HAS_CUDA
  if (!cudaAvailable() || !at::detail::getCUDAHooks().hasCuDNN()) return {};
  const Version torch{TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH};
  return conv3dVersionWarnings(torch, cudnnVersionFromInt(at::detail::getCUDAHooks().versionRuntimeCuDNN()));
#else
  return {};
#endif
}

namespace {
#ifdef SPLITSEG_HAS_CUDA
// NVML through dlopen (the driver ships it; nothing to link): device memory in use before this
// process creates a context there. The device is found by PCI bus id, CUDA's order may differ.
std::int64_t nvmlUsedBytes(const char* pciBusId) {
  struct Memory { unsigned long long total, free, used; };
  static void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  using Init = int (*)();
  using ByPci = int (*)(const char*, void**);
  using MemInfo = int (*)(void*, Memory*);
  auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
  auto byPci = reinterpret_cast<ByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto memInfo = reinterpret_cast<MemInfo>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  void* device = nullptr;
  Memory m{};
  if (!init || !byPci || !memInfo || init() != 0 || byPci(pciBusId, &device) != 0 || memInfo(device, &m) != 0)
    return -1;
  return static_cast<std::int64_t>(m.used);
}

CudaAllowance measure(int index) {
  CudaAllowance a;
  const std::string name = "cuda:" + std::to_string(index);
  char bus[64] = {0};
  const std::int64_t before =
      cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess ? nvmlUsedBytes(bus) : std::int64_t{-1};
  try {
    const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    auto x = torch::randn({1, 32, 64, 64, 64}, torch::TensorOptions(dev)).requires_grad_();
    auto w = torch::randn({32, 32, 3, 3, 3}, torch::TensorOptions(dev)).requires_grad_();
    torch::cuda::synchronize(index);
    cudaResetPeak(name);
    auto y = torch::conv3d(x, w, {}, 1, 1);
    torch::cuda::synchronize(index);
    DeviceMemory m = cudaMemory(name);
    std::int64_t transient = m.peak - m.allocated;
    cudaResetPeak(name);
    auto grads = torch::autograd::grad({y}, {x, w}, {torch::ones_like(y)});
    torch::cuda::synchronize(index);
    m = cudaMemory(name);
    transient = std::max(transient, m.peak - m.allocated);
    a.workspaceBytes = std::max<std::int64_t>(transient, 0);
  } catch (const c10::Error& e) {
    a.method = std::string("probe convolution failed: ") + e.what_without_backtrace();
    return a;
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  const DeviceMemory m = cudaMemory(name);
  const std::int64_t used = m.total - m.free - m.reserved;
  a.contextBytes = std::max<std::int64_t>(before >= 0 ? used - before : used, 0);
  a.method = before >= 0 ? "nvml-before-after" : "total-minus-free";
  return a;
}
#endif

std::mutex& cacheMutex() {
  static std::mutex m;
  return m;
}
} // namespace

CudaAllowance cudaAllowance(int index) {
  std::lock_guard<std::mutex> lock(cacheMutex());
  static std::map<int, CudaAllowance> cache;
  auto it = cache.find(index);
  if (it != cache.end()) return it->second;
  CudaAllowance a;
#ifdef SPLITSEG_HAS_CUDA
  if (index < cudaDeviceCount()) a = measure(index);
  else a.method = "no CUDA device " + std::to_string(index);
#else
  a.method = "built without CUDA";
#endif
  cache[index] = a;
  return a;
}

std::vector<DeviceInfo> detectDevices() {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < cudaDeviceCount(); ++i) {
    const std::string name = "cuda:" + std::to_string(i);
    DeviceInfo d;
    d.name = name;
    d.description = cudaDeviceName(i);
    d.cuda = cudaAllowance(i);  // before reading free memory: the probe creates the context
    d.allowanceBytes = d.cuda.total();
    d.warnings = cudnnWarnings();
    const DeviceMemory m = cudaMemory(name);
    d.totalBytes = m.total;
    d.freeBytes = m.free;
    out.push_back(d);
  }
  DeviceInfo cpu;
  cpu.name = "cpu";
  cpu.description = "host (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
  cpu.totalBytes = hostTotalBytes();
  cpu.freeBytes = hostAvailableBytes();
  cpu.threads = at::get_num_threads();
  out.push_back(cpu);
  return out;
}

int rankThreads(int ranks) {
  if (const char* s = std::getenv("OMP_NUM_THREADS"); s && std::atoi(s) > 0) return std::atoi(s);
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return static_cast<int>(std::max(1L, cores / std::max(1, ranks)));
}

std::vector<std::pair<std::string, std::string>> deviceStandIns() {
  std::vector<std::pair<std::string, std::string>> out;
  const char* env = std::getenv("SPLITSEG_STAND_INS");
  if (!env || !*env) return out;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InvalidArgument("SPLITSEG_STAND_INS entry '" + item + "' must be device=stand-in (cuda:1=cpu)");
    out.emplace_back(placement::canonicalDevice(item.substr(0, eq)), placement::canonicalDevice(item.substr(eq + 1)));
  }
  return out;
}

std::string runsOn(const std::string& device) {
  for (const auto& [name, standIn] : deviceStandIns())
    if (name == device) return standIn;
  return device;
}

std::vector<std::string> runnableDeviceNames() {
  // No probe here: naming the devices must not create contexts or touch memory statistics.
  std::vector<std::string> names;
  for (int i = 0; i < cudaDeviceCount(); ++i) names.push_back("cuda:" + std::to_string(i));
  names.push_back("cpu");
  // Rehearsal stand-ins (SPLITSEG_STAND_INS) run too, after the real devices (never the default).
  for (const auto& [name, standIn] : deviceStandIns())
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

} // namespace splitseg::engine
