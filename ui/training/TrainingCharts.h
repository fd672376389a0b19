#pragma once
// Live charts of a run: loss and Dice per step (training and validation), memory per device
// over time with a line at each device's total, one at the planner's peak for it and one for all
// devices together, and the process's host memory. Over ranks every rank's device is charted
// ("r0:cpu", "r1:cpu"), from each step's per-rank peaks. Points are buffered and pushed to Qt Charts a few times a second.
#include "core/engine/TrainingMetrics.h"
#include "ui/training/DecimatedSeries.h"

#include <QColor>
#include <QHash>
#include <QStringList>
#include <QTimer>
#include <QWidget>

#include <functional>
#include <memory>
#include <vector>

class QChart;
class QLineSeries;
class QChartView;
class QValueAxis;
class QCheckBox;
class QGraphicsTextItem;

namespace splitseg::ui {

class TrainingCharts : public QWidget {
  Q_OBJECT
public:
  explicit TrainingCharts(QWidget* parent = nullptr);
  ~TrainingCharts() override;

  void reset();
  void addStep(const engine::StepMetrics& m);
  void addValidation(const engine::ValidationMetrics& m);
  // The planner's peak for a device (the step metrics' terms, engine::plannedStepPeaks): a dashed
  // line in the device's colour, lighter, from the run's start on.
  void setPlanned(const QString& device, std::int64_t bytes);
  void flush();

  // For tests and the status line.
  const DecimatedSeries& trainLoss() const { return *trainLoss_; }
  const DecimatedSeries& trainDice() const { return *trainDice_; }
  const DecimatedSeries& valDice() const { return *valDice_; }
  const DecimatedSeries* deviceMemory(const QString& device) const;
  // The planned peak's line for a device, in MiB (negative: none).
  double plannedMiB(const QString& device) const;
  QStringList devices() const { return memory_.keys(); }
  const DecimatedSeries& hostMemory() const { return *host_; }
  QChartView* lossView() const { return lossView_; }
  QChartView* memoryView() const { return memView_; }
  // The line each chart shows while it has nothing to plot ("" once it has points).
  QString emptyHint(const QChartView* view) const;

private:
  DecimatedSeries* memorySeries(const QString& device);
  void fitAxes();
  void placeHints();

  QChartView* lossView_;
  QChartView* memView_;
  QChartView* hostView_;
  QValueAxis *lossX_, *lossY_, *diceY_, *memX_, *memY_, *hostX_, *hostY_;
  std::unique_ptr<DecimatedSeries> trainLoss_, valLoss_, trainDice_, valDice_, host_, sum_;
  QHash<QString, std::shared_ptr<DecimatedSeries>> memory_, totals_;
  QHash<QString, QColor> colors_;
  struct PlanLine {
    QLineSeries* series;
    double mib;
  };
  QHash<QString, PlanLine> planned_;
  struct Hint {
    QChartView* view;
    QGraphicsTextItem* text;
    std::function<bool()> empty;
  };
  std::vector<Hint> hints_;
  QCheckBox* showTotals_;
  QTimer flushTimer_;
  double t0_ = -1;
  double seconds_ = 0;
};

} // namespace splitseg::ui
