#pragma once
// An in-memory least-recently-used cache bounded in bytes, for preprocessed cases: a
// dataset larger than memory still trains, reloading what was evicted. Thread-safe.
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>

namespace splitseg::data {

template <typename Key, typename Value>
class BoundedCache {
public:
  BoundedCache(std::size_t maxBytes, std::function<std::size_t(const Value&)> sizeOf)
      : maxBytes_(maxBytes), sizeOf_(std::move(sizeOf)) {}

  // The cached value, or load() it. An entry above the bound is returned but not kept.
  // Loading happens outside the lock; two threads may load the same key once each.
  std::shared_ptr<const Value> get(const Key& key, const std::function<Value()>& load) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        ++hits_;
        order_.splice(order_.begin(), order_, it->second);
        return it->second->value;
      }
      ++misses_;
    }
    auto value = std::make_shared<const Value>(load());
    const std::size_t bytes = sizeOf_(*value);
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > maxBytes_ || index_.count(key)) return value;
    while (bytes_ + bytes > maxBytes_ && !order_.empty()) {
      bytes_ -= order_.back().bytes;
      index_.erase(order_.back().key);
      order_.pop_back();
    }
    order_.push_front({key, value, bytes});
    index_[key] = order_.begin();
    bytes_ += bytes;
    return value;
  }

  std::size_t bytes() const { std::lock_guard<std::mutex> l(mutex_); return bytes_; }
  std::size_t size() const { std::lock_guard<std::mutex> l(mutex_); return index_.size(); }
  std::size_t hits() const { std::lock_guard<std::mutex> l(mutex_); return hits_; }
  std::size_t misses() const { std::lock_guard<std::mutex> l(mutex_); return misses_; }
  std::size_t maxBytes() const { return maxBytes_; }

private:
  struct Entry {
    Key key;
    std::shared_ptr<const Value> value;
    std::size_t bytes;
  };
  std::size_t maxBytes_;
  std::function<std::size_t(const Value&)> sizeOf_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;  // most recent first
  std::map<Key, typename std::list<Entry>::iterator> index_;
  std::size_t bytes_ = 0, hits_ = 0, misses_ = 0;
};

} // namespace splitseg::data
