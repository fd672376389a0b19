#include "ui/placement/PlannerWorker.h"

#include "core/base/Error.h"

#include <QMetaObject>
#include <QPointer>

namespace splitseg::ui {

PlannerWorker::PlannerWorker(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(2);  // one estimate and one search at a time
}

PlannerWorker::~PlannerWorker() {
  cancelSearch();
  pool_.waitForDone();
}

void PlannerWorker::notifyBusy() { Q_EMIT busyChanged(busy(), searching()); }

void PlannerWorker::estimate(Structure structure, planner::PlanRequest request) {
  Snapshot s{std::move(structure), std::move(request)};
  if (estimateRunning_) {
    pending_ = std::move(s);  // the newest edit wins; older waiting ones are never planned
    return;
  }
  startEstimate(std::move(s));
}

void PlannerWorker::startEstimate(Snapshot s) {
  estimateRunning_ = true;
  notifyBusy();
  pool_.start([this, s = std::move(s)] {
    PlacementEstimate e = StageMemoryModel::estimate(s.structure, s.request);
    // Back on the UI thread; the destructor waits for this job, so `this` is alive here.
    QMetaObject::invokeMethod(this, [this, e = std::move(e)] {
      estimateRunning_ = false;
      if (pending_) {
        // An edit came in while planning: this result is already stale.
        Snapshot next = std::move(*pending_);
        pending_.reset();
        startEstimate(std::move(next));
        return;
      }
      notifyBusy();
      Q_EMIT estimated(e);
    }, Qt::QueuedConnection);
  });
}

template <class Result, class Work>
void PlannerWorker::runSearch(Snapshot s, Work work, std::function<void(std::optional<Result>, QString)> done) {
  cancelSearch();
  auto cancel = std::make_shared<CancelToken>();
  searchCancel_ = cancel;
  const auto generation = ++searchGeneration_;
  ++searchRunning_;
  notifyBusy();
  pool_.start([this, s = std::move(s), work, done, cancel, generation] {
    std::optional<Result> result;
    QString error;
    try {
      const planner::MemoryPlanner planner(*s.structure);
      result = work(planner, s.request, cancel.get());
    } catch (const Cancelled&) {
      error = tr("cancelled");
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(this, [this, result = std::move(result), error, done, generation] {
      --searchRunning_;
      if (generation == searchGeneration_) searchCancel_.reset();
      notifyBusy();
      done(result, error);
    }, Qt::QueuedConnection);
  });
}

void PlannerWorker::autoPlace(Structure structure, planner::PlanRequest request,
                              std::function<void(std::optional<planner::AutoPlaceResult>, QString)> done) {
  runSearch<planner::AutoPlaceResult>(
      {std::move(structure), std::move(request)},
      [](const planner::MemoryPlanner& planner, const planner::PlanRequest& r, const CancelToken* cancel) {
        return planner::AutoPlacer(planner, 4, cancel).place(r);
      },
      std::move(done));
}

void PlannerWorker::largestCube(Structure structure, planner::PlanRequest request,
                                std::function<void(std::optional<planner::LargestVolume>, QString)> done) {
  runSearch<planner::LargestVolume>(
      {std::move(structure), std::move(request)},
      [](const planner::MemoryPlanner& planner, const planner::PlanRequest& r, const CancelToken* cancel) {
        return planner::largestCube(planner, r, false, 4096, cancel);
      },
      std::move(done));
}

void PlannerWorker::largestWindow(Structure structure, planner::PlanRequest request, std::int64_t maxEdge,
                                  std::function<void(std::optional<WindowFit>, QString)> done) {
  runSearch<WindowFit>(
      {std::move(structure), std::move(request)},
      [maxEdge](const planner::MemoryPlanner& planner, const planner::PlanRequest& r, const CancelToken* cancel) {
        return WindowFit{planner::largestWindow(planner, r, maxEdge, cancel), planner::wholeVolumeEdge(planner, r)};
      },
      std::move(done));
}

void PlannerWorker::measureSpeeds(Structure structure, run::RunSpec run, std::vector<std::string> devices,
                                  std::array<std::int64_t, 3> patch, std::function<void(std::optional<Speeds>, QString)> done) {
  runSearch<Speeds>(
      {std::move(structure), {}},
      [run = std::move(run), devices = std::move(devices), patch](const planner::MemoryPlanner&,
                                                                  const planner::PlanRequest&, const CancelToken* cancel) {
        Speeds out;
        for (const auto& d : devices) {
          if (cancel->cancelled()) throw Cancelled();
          out[d] = engine::measureTrainingSpeed(run, d, patch);
        }
        return out;
      },
      std::move(done));
}

void PlannerWorker::cancelSearch() {
  if (searchCancel_) searchCancel_->cancel();
}

} // namespace splitseg::ui
