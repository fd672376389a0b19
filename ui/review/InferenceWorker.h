#pragma once
// Runs the engine's Inferer (whole volume or sliding window) on a worker QThread and, with a
// ground truth, the metrics too, so neither blocks the UI thread.
#include "core/base/CancelToken.h"
#include "core/placement/Placement.h"
#include "core/volume/Volume.h"
#include "ui/review/SegmentationMetrics.h"

#include <QMetaType>
#include <QObject>

#include <array>
#include <memory>

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::ui {

struct InferenceJob {
  std::shared_ptr<model::StagedNetwork> network;
  placement::Placement placement;
  std::string precision = "fp32";
  std::shared_ptr<const Volume> image;
  std::shared_ptr<const Volume> truth;      // optional
  std::array<std::int64_t, 3> window{0, 0, 0};  // 0 = whole volume
  double overlap = 0.5;
};

struct InferenceResult {
  std::shared_ptr<const Volume> labels;     // in the image's geometry
  std::vector<LabelMetrics> metrics;        // empty without ground truth
  double seconds = 0;
  QString error;
  bool cancelled = false;
};

class InferenceWorker : public QObject {
  Q_OBJECT
public:
  void run(const InferenceJob& job);
  void cancel() { token_.cancel(); }

Q_SIGNALS:
  void progress(double fraction, const QString& message);
  void finished(const splitseg::ui::InferenceResult& result);

private:
  CancelToken token_;
};

} // namespace splitseg::ui

Q_DECLARE_METATYPE(splitseg::ui::InferenceResult)
