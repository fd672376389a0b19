#pragma once
// Where each device's time goes within a training step: spans of forward, backward,
// recompute, transfer and waiting per device lane, for the workstation's device timeline and
// `train --timeline`. Times are host steady-clock seconds from the start of the step on the
// process that recorded them (ranks keep their own clocks; their steps start together because
// every rank waits for rank 0's batch).
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace splitseg::engine {

enum class SpanKind { Forward, Backward, Recompute, Transfer, Wait, Optimizer };
const char* toString(SpanKind kind);

struct TimelineSpan {
  std::string lane;   // the device as the placement names it: "cpu", "cuda:1", "r1:cuda:0"
  std::string stage;  // "" for the optimizer and for waits not tied to a stage
  SpanKind kind = SpanKind::Forward;
  int micro = 0;      // micro-batch (pipelined runs over ranks); 0 otherwise
  double start = 0;   // seconds from the step's start
  double end = 0;
};

// Lanes in order of first appearance.
std::vector<std::string> timelineLanes(const std::vector<TimelineSpan>& spans);
// Seconds a lane computed (the union of its forward, backward, recompute and optimizer spans:
// nested spans count once; transfers and waits are not work).
double laneBusySeconds(const std::vector<TimelineSpan>& spans, const std::string& lane);

// Collects one step's spans. Thread-safe: autograd's device threads and the sharded stages'
// slab threads add spans too.
class TimelineRecorder {
public:
  using Clock = std::chrono::steady_clock;
  void begin();  // a new step: clears the spans, the clock starts at 0
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void add(TimelineSpan span);
  void add(const std::string& lane, const std::string& stage, SpanKind kind, double start, double end, int micro = 0);
  std::vector<TimelineSpan> take();

private:
  Clock::time_point start_ = Clock::now();
  std::mutex mutex_;
  std::vector<TimelineSpan> spans_;
};

} // namespace splitseg::engine
