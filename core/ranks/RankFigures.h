#pragma once
// A rank's figures of one step as the doubles it sends rank 0, in the one order both ends use
// (PipelineTrainer appends its timeline spans after them).
#include "core/ranks/Comm.h"
#include "core/engine/TrainingMetrics.h"

#include <string>
#include <vector>

namespace splitseg::ranks {

constexpr std::int64_t kRankFigures = 6;

inline std::vector<double> rankFigures(const engine::RankStepStats& s) {
  return {s.computeSeconds, s.waitSeconds, s.idleSeconds, double(s.bytesSent), double(s.bytesReceived),
          double(s.peakBytes)};
}

// Rank `rank`'s stats from the kRankFigures doubles it sent (device left for rank 0 to fill in).
inline engine::RankStepStats rankStatsFrom(int rank, const std::vector<double>& v) {
  if (static_cast<std::int64_t>(v.size()) < kRankFigures)
    throw RankError("rank " + std::to_string(rank) + " sent a malformed step summary");
  return {rank, "", v[0], v[1], v[2], static_cast<std::int64_t>(v[3]), static_cast<std::int64_t>(v[4]),
          static_cast<std::int64_t>(v[5])};
}

} // namespace splitseg::ranks
