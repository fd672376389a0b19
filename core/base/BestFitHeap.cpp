#include "core/base/BestFitHeap.h"

#include <algorithm>
#include <iterator>

namespace splitseg {

std::size_t BestFitHeap::end() const {
  if (blocks_.empty()) return 0;
  const auto last = std::prev(blocks_.end());
  return last->first + last->second.size;
}

BestFitHeap::BlockIt BestFitHeap::insert(std::size_t offset, Block block) {
  auto it = blocks_.insert_or_assign(offset, block).first;
  if (block.state == State::Used) {
    used_ += static_cast<std::int64_t>(block.size);
    return it;
  }
  setOf(block.state).emplace(block.size, offset);
  if (block.state == State::Kept) kept_ += static_cast<std::int64_t>(block.size);
  return it;
}

void BestFitHeap::unlink(BlockIt it) {
  const auto size = static_cast<std::int64_t>(it->second.size);
  if (it->second.state == State::Used) {
    used_ -= size;
    return;
  }
  setOf(it->second.state).erase({it->second.size, it->first});
  if (it->second.state == State::Kept) kept_ -= size;
}

BestFitHeap::BlockIt BestFitHeap::merge(BlockIt left, BlockIt right) {
  const std::size_t offset = left->first;
  const Block merged{left->second.size + right->second.size, left->second.state};
  unlink(left);
  unlink(right);
  blocks_.erase(right);
  return insert(offset, merged);
}

BestFitHeap::BlockIt BestFitHeap::addFree(std::size_t offset, Block block) {
  // Neighbours merge only when their pages are in the same state, so a kept block's pages are
  // all there and a released block's are all gone: `kept` is exact, and a block kept beside
  // released memory is not given back with it (that would fault its pages in again every step).
  auto self = insert(offset, block);
  if (auto next = std::next(self); next != blocks_.end() && next->second.state == block.state)
    self = merge(self, next);
  if (self != blocks_.begin() && std::prev(self)->second.state == block.state) self = merge(std::prev(self), self);
  return self;
}

std::optional<BestFitHeap::Taken> BestFitHeap::take(std::size_t size, const std::function<bool(std::size_t)>& grow) {
  // Best fit among the kept blocks (no page faults), then among the released ones, then at the
  // top of the heap, into the last block when it is free.
  BlockIt it = blocks_.end();
  if (auto k = keptSet_.lower_bound({size, 0}); k != keptSet_.end()) it = blocks_.find(k->second);
  else if (auto r = releasedSet_.lower_bound({size, 0}); r != releasedSet_.end()) it = blocks_.find(r->second);
  std::size_t offset = 0;
  Block block{0, State::Released};
  if (it != blocks_.end()) {
    offset = it->first;
    block = it->second;
    unlink(it);
    blocks_.erase(it);
  } else {
    if (!blocks_.empty()) {
      const auto last = std::prev(blocks_.end());
      offset = last->first + last->second.size;
      if (last->second.state != State::Used) {
        offset = last->first;
        block = last->second;
        unlink(last);
        blocks_.erase(last);
      }
    }
    if (offset + size < offset || (grow && !grow(offset + size))) {
      if (block.size > 0) insert(offset, block);
      return std::nullopt;
    }
    block = Block{size, State::Released};
  }
  const bool hit = block.state == State::Kept;
  if (hit) ++hits_;
  else ++misses_;
  // The rest of a much larger block stays free for other blocks (added after this block is in
  // place, so that it cannot merge back into it).
  const std::size_t rest = block.size - size >= kMinSplitBytes ? block.size - size : 0;
  insert(offset, Block{block.size - rest, State::Used});
  if (rest > 0) addFree(offset + size, Block{rest, block.state});
  peakEnd_ = std::max(peakEnd_, end());
  return Taken{offset, block.size - rest, hit};
}

std::size_t BestFitHeap::give(std::size_t offset) {
  const auto it = blocks_.find(offset);
  if (it == blocks_.end() || it->second.state != State::Used) return 0;
  const std::size_t size = it->second.size;
  unlink(it);
  addFree(offset, Block{size, State::Kept});
  return size;
}

void BestFitHeap::trim(std::int64_t target, const std::function<void(std::size_t, std::size_t)>& release) {
  // Largest first: they cost the most to keep and are the least likely to be needed whole.
  while (kept_ > target && !keptSet_.empty()) {
    const auto it = blocks_.find(std::prev(keptSet_.end())->second);
    const std::size_t offset = it->first;
    const Block block{it->second.size, State::Released};
    unlink(it);
    if (release) release(offset, block.size);
    addFree(offset, block);
  }
}

} // namespace splitseg
