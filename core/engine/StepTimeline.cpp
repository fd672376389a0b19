#include "core/engine/StepTimeline.h"

#include <algorithm>
#include <utility>

namespace splitseg::engine {

const char* toString(SpanKind kind) {
  switch (kind) {
    case SpanKind::Forward: return "forward";
    case SpanKind::Backward: return "backward";
    case SpanKind::Recompute: return "recompute";
    case SpanKind::Transfer: return "transfer";
    case SpanKind::Wait: return "wait";
    case SpanKind::Optimizer: return "optimizer";
  }
  return "?";
}

std::vector<std::string> timelineLanes(const std::vector<TimelineSpan>& spans) {
  std::vector<std::string> lanes;
  for (const auto& s : spans)
    if (std::find(lanes.begin(), lanes.end(), s.lane) == lanes.end()) lanes.push_back(s.lane);
  return lanes;
}

double laneBusySeconds(const std::vector<TimelineSpan>& spans, const std::string& lane) {
  std::vector<std::pair<double, double>> busy;
  for (const auto& s : spans)
    if (s.lane == lane && s.kind != SpanKind::Transfer && s.kind != SpanKind::Wait && s.end > s.start)
      busy.emplace_back(s.start, s.end);
  std::sort(busy.begin(), busy.end());
  double total = 0, reach = -1e300;
  for (const auto& [a, b] : busy) {
    if (b <= reach) continue;
    total += b - std::max(a, reach);
    reach = b;
  }
  return total;
}

void TimelineRecorder::begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
  start_ = Clock::now();
}

void TimelineRecorder::add(TimelineSpan span) {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

void TimelineRecorder::add(const std::string& lane, const std::string& stage, SpanKind kind, double start, double end,
                           int micro) {
  add(TimelineSpan{lane, stage, kind, micro, start, end});
}

std::vector<TimelineSpan> TimelineRecorder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TimelineSpan> out;
  out.swap(spans_);
  return out;
}

} // namespace splitseg::engine
