#pragma once
// Runs the memory planner off the UI thread: the estimate behind every placement edit, and the
// searches (Auto-place, Largest cube, Review's largest window). Each job plans a snapshot taken on
// the UI thread (the network's structure and the planner's request), so the document can change
// meanwhile.
// Estimates coalesce: while one runs, only the newest request waits; a result that an edit has
// made stale is dropped. A new search cancels the one running. Results arrive on the UI thread.
#include "core/base/CancelToken.h"
#include "core/engine/DeviceSpeed.h"
#include "core/planner/AutoPlacer.h"
#include "core/planner/LargestVolume.h"
#include "ui/placement/StageMemoryModel.h"

#include <QObject>
#include <QThreadPool>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace splitseg::ui {

class PlannerWorker : public QObject {
  Q_OBJECT
public:
  using Structure = std::shared_ptr<const planner::NetworkStructure>;
  explicit PlannerWorker(QObject* parent = nullptr);
  ~PlannerWorker() override;  // cancels the search and waits for the jobs

  void estimate(Structure structure, planner::PlanRequest request);
  // Auto-place / the largest cube for the request's placement; `done` runs on the UI thread with
  // the result, or with the error text ("cancelled" when cancelSearch stopped it).
  void autoPlace(Structure structure, planner::PlanRequest request,
                 std::function<void(std::optional<planner::AutoPlaceResult>, QString)> done);
  void largestCube(Structure structure, planner::PlanRequest request,
                   std::function<void(std::optional<planner::LargestVolume>, QString)> done);
  // Review's "Largest that fits": the largest cubic inference window up to `maxEdge` for an
  // inference request, with the volume's edge (planner::wholeVolumeEdge) to say when it is all.
  struct WindowFit {
    planner::LargestVolume largest;
    std::int64_t volumeEdge = 0;
  };
  void largestWindow(Structure structure, planner::PlanRequest request, std::int64_t maxEdge,
                     std::function<void(std::optional<WindowFit>, QString)> done);
  // Times a few training steps of `run`'s network at `patch` on each of `devices` (this
  // process's, such as "cpu", "cuda:0"), one after another; Cancel stops before the next device.
  // Counts as a search (one at a time, the busy bar, Cancel).
  using Speeds = std::map<std::string, engine::MeasuredSpeed>;
  void measureSpeeds(Structure structure, run::RunSpec run, std::vector<std::string> devices,
                     std::array<std::int64_t, 3> patch, std::function<void(std::optional<Speeds>, QString)> done);
  void cancelSearch();

  bool estimating() const { return estimateRunning_ || pending_.has_value(); }
  bool searching() const { return searchRunning_ > 0; }
  bool busy() const { return estimating() || searching(); }

Q_SIGNALS:
  // The newest estimate (only results no later edit has superseded).
  void estimated(const splitseg::ui::PlacementEstimate& estimate);
  void busyChanged(bool busy, bool searching);

private:
  struct Snapshot {
    Structure structure;
    planner::PlanRequest request;
  };
  void startEstimate(Snapshot s);
  template <class Result, class Work>
  void runSearch(Snapshot s, Work work, std::function<void(std::optional<Result>, QString)> done);
  void notifyBusy();

  QThreadPool pool_;
  bool estimateRunning_ = false;
  std::optional<Snapshot> pending_;
  int searchRunning_ = 0;
  std::uint64_t searchGeneration_ = 0;
  std::shared_ptr<CancelToken> searchCancel_;
};

} // namespace splitseg::ui
