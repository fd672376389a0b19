#pragma once
// Evaluate dataset's worker: every case of an EvaluationPlan predicted with the session's run (in
// this process or as rank 0 over ranks, as the review predicts one volume), written and scored
// through core/evaluate, on a worker QThread. Each case is reported as it finishes.
#include "core/base/CancelToken.h"
#include "core/ranks/RankEnv.h"
#include "core/evaluate/DatasetEvaluation.h"
#include "core/planner/MemoryPlanner.h"
#include "core/run/RunSpec.h"

#include <QMetaType>
#include <QObject>
#include <QString>

#include <memory>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::ui {

struct DatasetEvaluationJob {
  std::shared_ptr<model::StagedNetwork> network;
  run::RunSpec run;  // the session's (a copy)
  evaluate::EvaluationPlan plan;
  ranks::RankEnv ranks;
  // What each case is planned on (the devices Review plans with) and the windows a pass holds:
  // each case's planned peaks beside its measured ones. No devices: not planned.
  std::vector<planner::DeviceSpec> planDevices;
  int windowsPerPass = 1;
};

struct DatasetCaseResult {
  int index = 0;
  evaluate::CaseResult result;
};

struct DatasetEvaluationResult {
  evaluate::EvaluationSummary summary;  // set when it finished
  QString error;                        // what stopped it (a failed case is no error: it is in summary)
  bool cancelled = false;
  double seconds = 0;
};

class DatasetEvaluationWorker : public QObject {
  Q_OBJECT
public:
  // Call on the UI thread before queuing run(), so a Cancel right after the start is honoured.
  void prepare() { token_.reset(); }
  void run(const DatasetEvaluationJob& job);
  void cancel() { token_.cancel(); }

Q_SIGNALS:
  void caseStarted(int index);
  void caseFinished(const splitseg::ui::DatasetCaseResult& result);
  // Over the whole evaluation: (cases done + this case's fraction) / cases.
  void progress(double fraction, const QString& message);
  void finished(const splitseg::ui::DatasetEvaluationResult& result);

private:
  CancelToken token_;
};

} // namespace splitseg::ui

Q_DECLARE_METATYPE(splitseg::ui::DatasetCaseResult)
Q_DECLARE_METATYPE(splitseg::ui::DatasetEvaluationResult)
