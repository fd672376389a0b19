#pragma once
// A caching allocator for LibTorch's CPU tensors, the host-side counterpart of CUDA's caching
// allocator. Why: a training step allocates and frees the same few hundred MiB of activations
// every step; from malloc each large block comes back as fresh pages that the kernel zero-fills
// on first touch (a measurable share of a CPU step: docs/calibration.md, "Engine and model choices"). Freed
// blocks are kept and handed out again instead.
//
// Large blocks live in one heap: a reserved range of address space that grows at its top, where
// a request takes the best-fitting free block (split if much larger) and a freed block merges
// with free neighbours, so freed memory serves any later size (the cache of whole blocks it
// replaced reused a block only for a tensor of about its size, and grew more). Where each block
// goes is core/base/BestFitHeap's rule. A block handed out whole for a slightly smaller request
// comes back at its own size, so nothing is lost and `inUse` does not drift.
//
// Allocations are still reported through c10's memory-reporting hook exactly as the default
// allocator reports them (requested bytes, only while a reporter is active), so CpuMemoryCounter,
// CPU budgets and the planner's measurements see the same numbers with or without the cache.
// With the cache installed a CPU budget is also enforced at allocation time: an allocation that
// would take the active CpuMemoryCounter past its budget is refused with c10::OutOfMemoryError.
#include "core/base/BestFitHeap.h"

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace splitseg::engine {

struct HostCacheStats {
  std::int64_t inUse = 0;    // bytes handed out now (block capacities)
  std::int64_t cached = 0;   // freed bytes kept for reuse (resident, in free heap blocks)
  std::int64_t limit = 0;    // most bytes the cache keeps
  std::int64_t hits = 0;     // large allocations served from kept memory
  std::int64_t misses = 0;   // large allocations that needed fresh memory
  std::int64_t heap = 0;     // the heap's extent: every large block, in use or free
};

class HostCachingAllocator final : public c10::Allocator {
public:
  // Blocks smaller than this go straight back to malloc (its arenas handle them well).
  static constexpr std::size_t kMinCachedBytes = BestFitHeap::kMinSplitBytes;

  // limitBytes: most freed bytes kept; beyond it the largest free blocks are released to the
  // system (their address range stays in the heap). heapBytes: address space reserved for the
  // heap (0: twice the RAM); large blocks beyond it come from malloc and are not kept.
  explicit HostCachingAllocator(std::int64_t limitBytes, std::int64_t heapBytes = 0);
  ~HostCachingAllocator() override;
  HostCachingAllocator(const HostCachingAllocator&) = delete;
  HostCachingAllocator& operator=(const HostCachingAllocator&) = delete;

  c10::DataPtr allocate(std::size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // Returns every cached block to the system (e.g. when a run ends).
  void emptyCache();
  void setLimit(std::int64_t limitBytes);
  HostCacheStats stats() const;

private:
  struct Header;
  static void release(void* data);
  void recycle(Header* header);
  bool commitLocked(std::size_t end);
  void trimLocked(std::int64_t target);
  HostCacheStats statsLocked() const;

  mutable std::mutex mutex_;
  char* base_ = nullptr;        // the reserved range (nullptr: no heap, every block from malloc)
  std::size_t reserved_ = 0;
  std::size_t committed_ = 0;   // bytes from base_ made readable and writable
  BestFitHeap heap_;            // which bytes of the range hold which block
  std::int64_t mallocInUse_ = 0;  // bytes of the blocks from malloc handed out now
  std::int64_t limit_ = 0;
};

// The process-wide instance once installed as LibTorch's CPU allocator, else nullptr.
HostCachingAllocator* hostCachingAllocator();
// Installs it (idempotent: a second call only changes the limit). A limit of 0 installs nothing.
// The instance is never destroyed: tensors may be freed during static destruction.
HostCachingAllocator* installHostCachingAllocator(std::int64_t limitBytes);
// SPLITSEG_HOST_CACHE: "off"/"0" disables, a size ("8GiB") sets the limit; default half the RAM.
std::int64_t hostCacheLimitFromEnvironment();
// What the applications call at start-up: install with the environment's limit.
void installHostCachingAllocatorFromEnvironment();

// Returns the cached blocks to the system when it goes out of scope: a run's worker holds one, so
// the workstation does not keep a finished run's peak memory while it sits idle.
class HostCacheRelease {
public:
  HostCacheRelease() = default;
  ~HostCacheRelease() {
    if (auto* cache = hostCachingAllocator()) cache->emptyCache();
  }
  HostCacheRelease(const HostCacheRelease&) = delete;
  HostCacheRelease& operator=(const HostCacheRelease&) = delete;
};

} // namespace splitseg::engine
