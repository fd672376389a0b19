#pragma once
// Cooperative cancel and pause, shared between the thread that runs the work and the
// thread that controls it. The worker calls pausePoint() between steps.
#include <atomic>
#include <condition_variable>
#include <mutex>

namespace splitseg {

class CancelToken {
public:
  void cancel();
  void pause();
  void resume();
  bool cancelled() const { return cancelled_.load(); }
  bool paused() const { return paused_.load(); }
  // Blocks while paused; throws Cancelled if cancelled (also when cancelled during a pause).
  void pausePoint();
  // Re-arms a token for another run.
  void reset();

private:
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> paused_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
};

} // namespace splitseg
