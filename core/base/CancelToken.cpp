#include "core/base/CancelToken.h"
#include "core/base/Error.h"

namespace splitseg {

void CancelToken::cancel() {
  { std::lock_guard<std::mutex> lock(mutex_); cancelled_ = true; }
  cv_.notify_all();
}

void CancelToken::pause() { paused_ = true; }

void CancelToken::resume() {
  { std::lock_guard<std::mutex> lock(mutex_); paused_ = false; }
  cv_.notify_all();
}

void CancelToken::pausePoint() {
  if (paused_) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return !paused_ || cancelled_; });
  }
  if (cancelled_) throw Cancelled();
}

void CancelToken::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = false;
  paused_ = false;
}

} // namespace splitseg
