#include "core/engine/HostCachingAllocator.h"

#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/MemoryMeter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <string>

namespace splitseg::engine {

// Lives in the 64 bytes before the data, so the data pointer is its own context (a "simple"
// DataPtr, as LibTorch's raw_allocate/raw_deallocate expect) and stays 64-byte aligned.
struct HostCachingAllocator::Header {
  static constexpr std::uint64_t kMagic = 0x53706c6974536567ULL;  // "SplitSeg"
  std::uint64_t magic;
  HostCachingAllocator* owner;
  std::size_t capacity;  // usable bytes after the header
  std::size_t requested;
  bool reported;  // counted by a memory reporter at allocation: report its free as well
};

namespace {
constexpr std::size_t kHeaderBytes = 64;
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPage = 4096;

char* dataOf(void* header) { return static_cast<char*>(header) + kHeaderBytes; }
std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
} // namespace

HostCachingAllocator::HostCachingAllocator(std::int64_t limitBytes) { stats_.limit = limitBytes; }

HostCachingAllocator::~HostCachingAllocator() { emptyCache(); }

c10::DataPtr HostCachingAllocator::allocate(std::size_t bytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (bytes == 0) return {nullptr, nullptr, &release, cpu};
  // A CPU budget is enforced here, before the memory exists, the way CUDA's allocator refuses
  // beyond the device: the op that asked fails with c10::OutOfMemoryError and the step unwinds.
  if (CpuMemoryCounter* counter = activeCpuMemoryCounter();
      counter && !counter->admits(static_cast<std::int64_t>(bytes))) {
    counter->markExceeded();
    c10::reportOutOfMemoryToProfiler(static_cast<std::int64_t>(bytes), 0, 0, cpu);
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU budget: allocating ", bytes, " bytes with ", counter->allocated(),
                     " in use would exceed the budget of ", counter->budget(), " bytes");
  }
  const bool large = bytes >= kMinCachedBytes;
  // Large blocks are page multiples so that equal-sized tensors of a step share blocks.
  const std::size_t capacity = large ? roundUp(bytes, kPage) : roundUp(bytes, kAlignment);
  Header* h = nullptr;
  std::int64_t inUse = 0, reserved = 0;
  // Under the lock: counts a block as handed out and notes the totals for the report.
  auto account = [&] {
    stats_.inUse += static_cast<std::int64_t>(h->capacity);
    inUse = stats_.inUse;
    reserved = stats_.inUse + stats_.cached;
  };
  if (large) {
    // Best fit, wasting at most an eighth: a much larger block is better left for a larger tensor.
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(capacity);
    if (it != free_.end() && it->first <= capacity + capacity / 8) {
      h = it->second;
      free_.erase(it);
      stats_.cached -= static_cast<std::int64_t>(h->capacity);
      ++stats_.hits;
      account();
    } else {
      ++stats_.misses;
    }
  }
  if (!h) {
    void* base = nullptr;
    if (posix_memalign(&base, kAlignment, kHeaderBytes + capacity) != 0) {
      emptyCache();  // cached blocks may be what stands in the way
      if (posix_memalign(&base, kAlignment, kHeaderBytes + capacity) != 0) {
        c10::reportOutOfMemoryToProfiler(static_cast<std::int64_t>(bytes), 0, 0, cpu);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
                         bytes, " bytes.");
      }
    }
    h = new (base) Header{Header::kMagic, this, capacity, 0, false};
    std::lock_guard<std::mutex> lock(mutex_);
    account();
  }
  h->requested = bytes;
  h->reported = c10::memoryProfilingEnabled();
  void* data = dataOf(h);
  if (h->reported)
    c10::reportMemoryUsageToProfiler(data, static_cast<std::int64_t>(bytes), static_cast<std::size_t>(inUse),
                                     static_cast<std::size_t>(reserved), cpu);
  return {data, data, &release, cpu};
}

void HostCachingAllocator::release(void* data) {
  if (!data) return;
  auto* h = reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
  TORCH_INTERNAL_ASSERT(h->magic == Header::kMagic, "HostCachingAllocator: freeing a foreign pointer");
  h->owner->recycle(h);
}

void HostCachingAllocator::recycle(Header* h) {
  // Same rule as LibTorch's own CPU allocator: a free is reported when the allocation was and a
  // reporter is active on the freeing thread.
  const bool report = h->reported && c10::memoryProfilingEnabled();
  const auto requested = static_cast<std::int64_t>(h->requested);
  std::int64_t inUse = 0, reserved = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.inUse -= static_cast<std::int64_t>(h->capacity);
    const bool keep = h->capacity >= kMinCachedBytes && static_cast<std::int64_t>(h->capacity) <= stats_.limit;
    if (keep) {
      trimLocked(stats_.limit - static_cast<std::int64_t>(h->capacity));
      free_.emplace(h->capacity, h);
      stats_.cached += static_cast<std::int64_t>(h->capacity);
    } else {
      h->magic = 0;
      std::free(h);
    }
    inUse = stats_.inUse;
    reserved = stats_.inUse + stats_.cached;
  }
  if (report)
    c10::reportMemoryUsageToProfiler(dataOf(h) /* only an id, not dereferenced */, -requested,
                                     static_cast<std::size_t>(inUse), static_cast<std::size_t>(reserved),
                                     c10::Device(c10::DeviceType::CPU));
}

void HostCachingAllocator::trimLocked(std::int64_t target) {
  // Largest first: they cost the most to keep and are the least likely to fit a smaller tensor.
  while (stats_.cached > target && !free_.empty()) {
    auto it = std::prev(free_.end());
    stats_.cached -= static_cast<std::int64_t>(it->second->capacity);
    it->second->magic = 0;
    std::free(it->second);
    free_.erase(it);
  }
}

c10::DeleterFnPtr HostCachingAllocator::raw_deleter() const { return &release; }

void HostCachingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

void HostCachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  trimLocked(0);
}

void HostCachingAllocator::setLimit(std::int64_t limitBytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.limit = limitBytes;
  trimLocked(limitBytes);
}

HostCacheStats HostCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

namespace {
HostCachingAllocator*& installed() {
  static HostCachingAllocator* instance = nullptr;
  return instance;
}
std::mutex& installMutex() {
  static std::mutex m;
  return m;
}
} // namespace

HostCachingAllocator* hostCachingAllocator() { return installed(); }

HostCachingAllocator* installHostCachingAllocator(std::int64_t limitBytes) {
  std::lock_guard<std::mutex> lock(installMutex());
  if (installed()) {
    installed()->setLimit(limitBytes);
    return installed();
  }
  if (limitBytes <= 0) return nullptr;
  installed() = new HostCachingAllocator(limitBytes);  // deliberately never deleted
  // Priority above the default (0) so a later default registration cannot displace it.
  c10::SetCPUAllocator(installed(), /*priority=*/1);
  return installed();
}

std::int64_t hostCacheLimitFromEnvironment() {
  const char* env = std::getenv("SPLITSEG_HOST_CACHE");
  if (env && *env) {
    const std::string v(env);
    if (v == "off" || v == "0" || v == "no" || v == "false") return 0;
    try {
      return parseBytes(v);
    } catch (const std::exception&) {
      throw InvalidArgument("SPLITSEG_HOST_CACHE: expected off or a size such as 8GiB, got '" + v + "'");
    }
  }
  return hostTotalBytes() / 2;
}

void installHostCachingAllocatorFromEnvironment() {
  installHostCachingAllocator(hostCacheLimitFromEnvironment());
}

} // namespace splitseg::engine
