#pragma once
// A caching allocator for LibTorch's CPU tensors, the host-side counterpart of CUDA's caching
// allocator. Why: a training step allocates and frees the same few hundred MiB of activations
// every step; from malloc each large block comes back as fresh pages that the kernel zero-fills
// on first touch (about 100k page faults and ~15% of a 64^3 CPU step, measured). Freed blocks are
// kept and handed out again instead.
//
// Allocations are still reported through c10's memory-reporting hook exactly as the default
// allocator reports them (requested bytes, only while a reporter is active), so CpuMemoryCounter,
// CPU budgets and the planner's measurements see the same numbers with or without the cache.
// With the cache installed a CPU budget is also enforced at allocation time: an allocation that
// would take the active CpuMemoryCounter past its budget is refused with c10::OutOfMemoryError.
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace splitseg::engine {

struct HostCacheStats {
  std::int64_t inUse = 0;    // bytes handed out now (block capacities)
  std::int64_t cached = 0;   // freed bytes kept for reuse
  std::int64_t limit = 0;    // most bytes the cache keeps
  std::int64_t hits = 0;     // large allocations served from the cache
  std::int64_t misses = 0;   // large allocations that needed fresh memory
};

class HostCachingAllocator final : public c10::Allocator {
public:
  // Blocks smaller than this go straight back to malloc (its arenas handle them well).
  static constexpr std::size_t kMinCachedBytes = std::size_t{256} << 10;

  // limitBytes: most freed bytes kept; beyond it the largest cached blocks are released.
  explicit HostCachingAllocator(std::int64_t limitBytes);
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
  void trimLocked(std::int64_t target);

  mutable std::mutex mutex_;
  std::multimap<std::size_t, Header*> free_;  // by capacity: best fit
  HostCacheStats stats_;
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
