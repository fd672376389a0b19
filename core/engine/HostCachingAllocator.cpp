#include "core/engine/HostCachingAllocator.h"

#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/MemoryMeter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>

namespace splitseg::engine {

// Lives in the 64 bytes before the data, so the data pointer is its own context (a "simple"
// DataPtr, as LibTorch's raw_allocate/raw_deallocate expect) and stays 64-byte aligned. A heap
// block starts with its header; other blocks come from malloc.
struct HostCachingAllocator::Header {
  static constexpr std::uint64_t kMagic = 0x53706c6974536567ULL;  // "SplitSeg"
  std::uint64_t magic;
  HostCachingAllocator* owner;
  std::size_t capacity;  // bytes of the block, header included
  std::size_t requested;
  bool inHeap;
  bool reported;  // counted by a memory reporter at allocation: report its free as well
};

namespace {
constexpr std::size_t kHeaderBytes = 64;
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPage = 4096;
// The heap is made readable and writable in steps of this many bytes as it grows.
constexpr std::size_t kCommitStep = std::size_t{2} << 20;

char* dataOf(void* header) { return static_cast<char*>(header) + kHeaderBytes; }
std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
} // namespace

HostCachingAllocator::HostCachingAllocator(std::int64_t limitBytes, std::int64_t heapBytes) : limit_(limitBytes) {
  // Address space only: nothing is committed until the heap grows into it.
  std::size_t want = heapBytes > 0 ? static_cast<std::size_t>(heapBytes)
                                   : static_cast<std::size_t>(std::max<std::int64_t>(hostTotalBytes(), 1) * 2);
  want = std::min(roundUp(std::max(want, kCommitStep), kCommitStep), std::size_t{64} << 40);
  // A limit on the address space (ulimit -v) may refuse the first size: try smaller ones.
  for (; want >= kCommitStep && !base_; want /= 2) {
    void* p = mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      base_ = static_cast<char*>(p);
      reserved_ = want;
    }
  }
}

HostCachingAllocator::~HostCachingAllocator() {
  emptyCache();
  if (base_ && heap_.used() == 0) munmap(base_, reserved_);  // else tensors still live in it
}

bool HostCachingAllocator::commitLocked(std::size_t end) {
  if (end > reserved_) return false;
  if (end <= committed_) return true;
  const std::size_t to = std::min(roundUp(end, kCommitStep), reserved_);
  if (mprotect(base_ + committed_, to - committed_, PROT_READ | PROT_WRITE) != 0) return false;
  committed_ = to;
  return true;
}

HostCacheStats HostCachingAllocator::statsLocked() const {
  HostCacheStats s;
  s.inUse = heap_.used() + mallocInUse_;
  s.cached = heap_.kept();
  s.limit = limit_;
  s.hits = heap_.hits();
  s.misses = heap_.misses();
  s.heap = static_cast<std::int64_t>(heap_.peakEnd());
  return s;
}

c10::DataPtr HostCachingAllocator::allocate(std::size_t bytes) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (bytes == 0) return {nullptr, nullptr, &release, cpu};
  // A CPU budget is enforced here, before the memory exists, the way CUDA's allocator refuses
  // beyond the device: the op that asked fails with c10::OutOfMemoryError and the step unwinds.
  if (CpuMemoryCounter* counter = activeCpuMemoryCounter();
      counter && !counter->admits(static_cast<std::int64_t>(bytes))) {
    counter->markExceeded();
    c10::reportOutOfMemoryToProfiler(static_cast<std::int64_t>(bytes), 0, 0, cpu);
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU budget: allocating ", formatBytes(double(bytes)), " with ",
                     formatBytes(double(counter->inUse())), " in use would exceed the budget of ",
                     formatBytes(double(counter->budget())));
  }
  const bool large = bytes >= kMinCachedBytes && bytes <= (std::size_t{1} << 60);
  Header* h = nullptr;
  HostCacheStats now;  // what the memory report carries
  if (large) {
    // Page multiples, so that a block given back to the system is whole pages.
    const std::size_t size = roundUp(bytes + kHeaderBytes, kPage);
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<BestFitHeap::Taken> taken;
    if (base_) taken = heap_.take(size, [this](std::size_t end) { return commitLocked(end); });
    if (taken) {
      h = new (base_ + taken->offset) Header{Header::kMagic, this, taken->size, 0, true, false};
      now = statsLocked();
    }
  }
  if (!h) {
    // Small blocks (malloc's arenas handle them well), and large ones when the heap is full.
    const std::size_t capacity = roundUp(bytes, kAlignment) + kHeaderBytes;
    void* base = nullptr;
    if (capacity < bytes || posix_memalign(&base, kAlignment, capacity) != 0) {
      emptyCache();  // kept blocks may be what stands in the way
      if (capacity < bytes || posix_memalign(&base, kAlignment, capacity) != 0) {
        c10::reportOutOfMemoryToProfiler(static_cast<std::int64_t>(bytes), 0, 0, cpu);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "DefaultCPUAllocator: not enough memory: you tried to allocate ",
                         bytes, " bytes.");
      }
    }
    h = new (base) Header{Header::kMagic, this, capacity, 0, false, false};
    std::lock_guard<std::mutex> lock(mutex_);
    mallocInUse_ += static_cast<std::int64_t>(capacity);
    now = statsLocked();
  }
  h->requested = bytes;
  h->reported = c10::memoryProfilingEnabled();
  void* data = dataOf(h);
  if (h->reported)
    c10::reportMemoryUsageToProfiler(data, static_cast<std::int64_t>(bytes), static_cast<std::size_t>(now.inUse),
                                     static_cast<std::size_t>(now.inUse + now.cached), cpu);
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
  const bool inHeap = h->inHeap;
  h->magic = 0;
  HostCacheStats now;  // what the memory report carries
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (inHeap) {
      heap_.give(static_cast<std::size_t>(reinterpret_cast<char*>(h) - base_));
      if (heap_.kept() > limit_) trimLocked(limit_);
    } else {
      mallocInUse_ -= static_cast<std::int64_t>(h->capacity);
      std::free(h);
    }
    now = statsLocked();
  }
  if (report)
    c10::reportMemoryUsageToProfiler(static_cast<char*>(static_cast<void*>(h)) + kHeaderBytes /* only an id */,
                                     -requested, static_cast<std::size_t>(now.inUse),
                                     static_cast<std::size_t>(now.inUse + now.cached), c10::Device(c10::DeviceType::CPU));
}

void HostCachingAllocator::trimLocked(std::int64_t target) {
  // The pages go back to the system; the range stays in the heap and reads as zeros when reused.
  heap_.trim(target, [this](std::size_t offset, std::size_t size) { madvise(base_ + offset, size, MADV_DONTNEED); });
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
  limit_ = limitBytes;
  trimLocked(limitBytes);
}

HostCacheStats HostCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return statsLocked();
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
