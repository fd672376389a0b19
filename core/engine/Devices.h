#pragma once
// The devices LibTorch can run on here, with their memory, the fixed CUDA costs measured on them
// and warnings about the bundled cuDNN.
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::engine {

// Device memory a CUDA device spends outside the tensors of a step, measured once per process.
struct CudaAllowance {
  // Context, cuDNN/cuBLAS handles and the kernels a conv3d forward + backward loads: device memory
  // used after creating the context and running the probe, minus what the caching allocator
  // holds, minus the memory used before the context existed (through NVML when it loads; else
  // nothing is subtracted and other processes' memory on the device is counted too).
  std::int64_t contextBytes = -1;   // -1: not measured
  // Largest transient the probe (1x32x64^3 fp32 conv3d, 3^3 kernel, forward + backward) needed
  // beyond its tensors: cuDNN's workspace for that layer, taken from the caching allocator.
  std::int64_t workspaceBytes = -1;
  std::string method;               // "nvml-before-after" | "total-minus-free" | why not measured
  bool measured() const { return contextBytes >= 0 && workspaceBytes >= 0; }
  std::int64_t total() const { return measured() ? contextBytes + workspaceBytes : -1; }
};

struct DeviceInfo {
  std::string name;          // "cpu", "cuda:0"
  std::string description;   // "NVIDIA H200", "host (2 threads)"
  std::int64_t totalBytes = 0;
  std::int64_t freeBytes = 0;
  bool planningOnly = false; // added by the user for what-if planning; cannot run anything
  // Fixed cost the planner reserves on this device: the measured CUDA allowance, or -1 for the
  // planner's default (CPU, planning-only devices, or a CUDA device whose measurement failed).
  std::int64_t allowanceBytes = -1;
  int threads = 0;           // cpu: this process's intra-op threads (at::get_num_threads())
  CudaAllowance cuda;        // CUDA devices only
  std::vector<std::string> warnings;  // CUDA devices: cudnnWarnings()
};

// Runs the CUDA measurement at the first call (about a second per GPU), then returns the cached
// devices' static facts with fresh free-memory figures.
std::vector<DeviceInfo> detectDevices();
std::vector<std::string> runnableDeviceNames();
// Intra-op threads of each of `ranks` processes that `splitseg-cli launch` or the workstation
// starts on this host: OMP_NUM_THREADS when set, else this host's cores shared among them (as
// torchrun does), at least one.
int rankThreads(int ranks);
// Rehearsal of a placement written for devices this machine lacks: SPLITSEG_STAND_INS =
// "cuda:0=cpu,cuda:1=cpu" runs each named device's stages on the stand-in, with the plan's
// structure (splits, shards, transfers) unchanged. CI uses it to run multi-device placements on
// a CPU-only machine. Empty when unset; throws InvalidArgument for a malformed value.
std::vector<std::pair<std::string, std::string>> deviceStandIns();
// The device a placement's device name runs on here (its stand-in, if any).
std::string runsOn(const std::string& device);

// Measured once per device and cached; index is the CUDA ordinal.
CudaAllowance cudaAllowance(int index);

// Version of a library as numbers: {major, minor, patch}.
struct Version {
  int major = 0, minor = 0, patch = 0;
  bool operator<(const Version& o) const;
  std::string str() const;
};
// cuDNN's integer version (cudnnGetVersion): major*10000 + minor*100 + patch from cuDNN 9 on,
// major*1000 + minor*100 + patch before.
Version cudnnVersionFromInt(long v);
Version parseVersion(const std::string& text);  // "2.9.1+cu128" -> 2.9.1

// Known LibTorch/cuDNN traps for 3D convolutions (a pure rule, unit-tested):
//  - torch 2.9.x disabled cuDNN for conv3d with cuDNN before 9.15 (slow fallback, far more memory);
//  - cuDNN 9.8 to 9.10 computed wrong bf16 conv3d results.
// One line per problem, naming the versions; empty when none applies.
std::vector<std::string> conv3dVersionWarnings(const Version& torch, const Version& cudnn);
// The same rule for the torch and the runtime cuDNN of this process (empty without CUDA).
std::vector<std::string> cudnnWarnings();

} // namespace splitseg::engine
