#include "ui/review/DatasetEvaluationWorker.h"
#include "ui/review/InferenceWorker.h"

#include "core/base/Error.h"
#include "core/ranks/RankPeaks.h"
#include "core/ranks/RankRun.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Inferer.h"
#include "core/engine/PlannedPeaks.h"

#include <QElapsedTimer>

#include <algorithm>

namespace splitseg::ui {

namespace {
// The Inferer's progress through one case, as a share of the whole evaluation; the observer's
// calls report each case to the UI thread.
class CaseProgress final : public ProgressSink, public evaluate::EvaluationObserver {
public:
  CaseProgress(DatasetEvaluationWorker* w, const evaluate::EvaluationPlan& plan) : w_(w), plan_(plan) {}
  void progress(double f, const std::string& m) override {
    const double n = static_cast<double>(plan_.files.size());
    Q_EMIT w_->progress((static_cast<double>(k_) + std::clamp(f, 0.0, 1.0)) / n,
                        DatasetEvaluationWorker::tr("case %1/%2 %3: %4")
                            .arg(k_ + 1).arg(plan_.files.size()).arg(QString::fromStdString(plan_.files[k_].id), QString::fromStdString(m)));
  }
  void caseStarted(std::size_t k, const evaluate::CaseFiles&) override {
    k_ = k;
    Q_EMIT w_->caseStarted(static_cast<int>(k));
    progress(0.0, DatasetEvaluationWorker::tr("reading").toStdString());
  }
  void caseFinished(std::size_t k, const evaluate::CaseResult& r) override {
    Q_EMIT w_->caseFinished(DatasetCaseResult{static_cast<int>(k), r});
  }

private:
  DatasetEvaluationWorker* w_;
  const evaluate::EvaluationPlan& plan_;
  std::size_t k_ = 0;
};
} // namespace

void DatasetEvaluationWorker::run(const DatasetEvaluationJob& job) {
  const engine::HostCacheRelease releaseHostCache;  // declared first: runs last
  DatasetEvaluationResult r;
  QElapsedTimer clock;
  clock.start();
  try {
    CaseProgress sink(this, job.plan);
    if (job.ranks.distributed()) Q_EMIT progress(0.0, tr("waiting for %n other rank(s)", nullptr, job.ranks.worldSize - 1));
    const nlohmann::json runFields{{"placement", job.run.resolvePlacement(job.network->stageNames(), "cpu").describe()},
                                   {"window", job.run.window},
                                   {"mirror", run::mirrorToString(job.run.mirror)},
                                   {"keep_largest", job.run.keepLargest}};
    withInferer(job.network, job.run, job.ranks, [&](engine::Inferer& inferer, const ranks::LocalStages& local, const engine::InferOptions& o) {
      // Each case measured as `infer --dataset` measures it (and within the run's CPU budget):
      // this process's peaks, over ranks every other rank's over this case alone.
      const auto predict = [&](const Volume& source) {
        evaluate::DevicePeaks planned;  // on the network's grid, as the review plans it
        if (!job.planDevices.empty()) {
          const auto g = job.run.preprocessing.networkGrid(source.geometry()).size;  // x, y, z
          try {
            planned = engine::tensorPeaks(engine::plannedInference(*job.network, job.run, job.planDevices, {g[2], g[1], g[0]},
                                                                   job.windowsPerPass));
          } catch (const std::exception&) {  // not planned: the measured figures stand alone
          }
        }
        ranks::DevicePeaks peaks;
        Volume labels = ranks::predictLabelsMeasured(inferer, local, source, job.run.preprocessing, o, job.run.cpuBudgetBytes,
                                                    peaks, &sink, &token_);
        for (const auto& [device, bytes] : inferer.restartOtherPeaks()) peaks[device] = bytes;
        return evaluate::Predicted(std::move(labels), peaks, planned);
      };
      r.summary = evaluate::evaluateDataset(job.plan, predict, job.run.keepLargest, runFields, &sink);
    }, &token_);
  } catch (...) {
    describeFailure(std::current_exception(), r.error, r.cancelled);
  }
  r.seconds = clock.elapsed() / 1000.0;
  Q_EMIT finished(r);
}

} // namespace splitseg::ui
