#pragma once
// Where the host caching allocator (core/engine/HostCachingAllocator) puts each large block, as
// offsets only: best fit among the free blocks, else at the top; a much larger block is split
// and a freed block merges with free neighbours whose pages are in the same state. Kept apart
// from the memory itself so that the rules are tested as plain offsets (BestFitHeapTest) and a
// trace of a run's allocations can be replayed through them.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace splitseg {

class BestFitHeap {
public:
  // The rest of a split block is kept free only from this size (a smaller rest stays with the
  // block); the host cache also puts tensors in its heap only from this size.
  static constexpr std::size_t kMinSplitBytes = std::size_t{256} << 10;
  // Kept: free with its pages resident; Released: free, pages given back to the system.
  enum class State { Used, Kept, Released };

  struct Taken {
    std::size_t offset = 0;
    std::size_t size = 0;   // the block's size: the request, or more when the rest was too small to split
    bool hit = false;       // served from kept memory (no fresh pages)
  };

  // A block of `size` bytes. At the top the heap grows to offset + size, first asked of `grow`
  // (the allocator commits pages there; none: always): nullopt and no change when it refuses.
  std::optional<Taken> take(std::size_t size, const std::function<bool(std::size_t end)>& grow = {});
  // The used block at `offset` becomes free (Kept). Returns its size.
  std::size_t give(std::size_t offset);
  // Releases the largest kept blocks until at most `target` bytes are kept, telling `release`
  // each range; the ranges stay in the heap as Released blocks.
  void trim(std::int64_t target, const std::function<void(std::size_t offset, std::size_t size)>& release);

  std::int64_t used() const { return used_; }      // bytes in used blocks
  std::int64_t kept() const { return kept_; }      // bytes in kept free blocks
  std::size_t end() const;                         // the top of the highest block now
  std::size_t peakEnd() const { return peakEnd_; } // the highest top ever
  std::int64_t hits() const { return hits_; }
  std::int64_t misses() const { return misses_; }

private:
  struct Block {
    std::size_t size;
    State state;
  };
  using BlockIt = std::map<std::size_t, Block>::iterator;
  using FreeSet = std::set<std::pair<std::size_t, std::size_t>>;  // (size, offset): best fit first
  FreeSet& setOf(State state) { return state == State::Kept ? keptSet_ : releasedSet_; }
  BlockIt insert(std::size_t offset, Block block);
  void unlink(BlockIt it);
  BlockIt merge(BlockIt left, BlockIt right);
  BlockIt addFree(std::size_t offset, Block block);

  std::map<std::size_t, Block> blocks_;  // every block, by offset
  FreeSet keptSet_, releasedSet_;
  std::int64_t used_ = 0, kept_ = 0, hits_ = 0, misses_ = 0;
  std::size_t peakEnd_ = 0;
};

} // namespace splitseg
