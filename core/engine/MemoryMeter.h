#pragma once
// Measured device memory. CUDA: the caching allocator's statistics plus cudaMemGetInfo.
// CPU: every allocation LibTorch makes, counted through c10's memory-reporting hook (the
// mechanism the PyTorch profiler uses), plus process RSS.
#include "core/engine/TrainingMetrics.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace splitseg::engine {

// Counts LibTorch CPU allocations made on threads where a CpuMemoryScope is active.
// An optional budget turns an allocation beyond it into an OutOfMemoryError for "cpu".
class CpuMemoryCounter {
public:
  std::int64_t allocated() const { return allocated_.load(); }
  std::int64_t peak() const { return peak_.load(); }
  void resetPeak() { peak_.store(allocated_.load()); }
  void setBudget(std::int64_t bytes) { budget_ = bytes; }  // 0 = none
  std::int64_t budget() const { return budget_; }
  // Bytes that count against the budget but were allocated before the counter started (the
  // weights and the optimizer's moments of a training step): not in allocated() or peak(), which
  // stay the step's own, but in what the budget compares with, inUse().
  void setHeld(std::int64_t bytes) { held_ = bytes; }
  std::int64_t held() const { return held_; }
  std::int64_t inUse() const { return allocated_.load() + held_; }
  // Called by the hook with +size on allocation, -size on free. Returns false when over budget.
  bool record(std::int64_t delta);
  // Whether an allocation of `bytes` stays within the budget. The host caching allocator asks
  // before allocating and refuses with c10::OutOfMemoryError (as CUDA's allocator does) when not;
  // without it installed the budget is only checked after the fact (exceeded()).
  bool admits(std::int64_t bytes) const { return budget_ <= 0 || inUse() + bytes <= budget_; }
  void markExceeded() { exceeded_ = true; }
  // True once an allocation went beyond the budget; the step that did it is abandoned.
  bool exceeded() const { return exceeded_.load(); }
  void clearExceeded() { exceeded_ = false; }

private:
  std::atomic<bool> exceeded_{false};
  std::atomic<std::int64_t> allocated_{0};
  std::atomic<std::int64_t> peak_{0};
  std::int64_t budget_ = 0;
  std::int64_t held_ = 0;
};

// Installs the counter as the memory reporter of the current thread for its lifetime.
class CpuMemoryScope {
public:
  explicit CpuMemoryScope(CpuMemoryCounter& counter);
  ~CpuMemoryScope();
  CpuMemoryScope(const CpuMemoryScope&) = delete;
  CpuMemoryScope& operator=(const CpuMemoryScope&) = delete;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The counter of the CpuMemoryScope active on this thread (autograd workers inherit it), or nullptr.
CpuMemoryCounter* activeCpuMemoryCounter();

std::int64_t processRssBytes();
std::int64_t hostTotalBytes();
std::int64_t hostAvailableBytes();

bool cudaAvailable();
int cudaDeviceCount();
// Memory of a CUDA device ("cuda:N"); all zeros when CUDA is absent.
DeviceMemory cudaMemory(const std::string& device);
void cudaResetPeak(const std::string& device);
std::string cudaDeviceName(int index);

// Meter for the devices of a run: CPU through a counter, CUDA through the allocator.
class MemoryMeter {
public:
  explicit MemoryMeter(std::vector<std::string> devices);
  CpuMemoryCounter& cpu() { return cpu_; }
  void resetPeaks();
  std::vector<DeviceMemory> read() const;

private:
  std::vector<std::string> devices_;
  CpuMemoryCounter cpu_;
};

} // namespace splitseg::engine
