#include "ui/training/TrainingCharts.h"
#include "core/engine/PlannedPeaks.h"

#include <cmath>

#include <QChart>
#include <QChartView>
#include <QAbstractAxis>
#include <QCheckBox>
#include <QGraphicsTextItem>
#include <QTextDocument>
#include <QLegend>
#include <QLineSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>

namespace splitseg::ui {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;

QChartView* makeView(QChart* chart, QWidget* parent) {
  chart->setTheme(QChart::ChartThemeDark);
  chart->setMargins(QMargins(2, 2, 2, 2));
  chart->legend()->setAlignment(Qt::AlignTop);
  QFont lf = chart->legend()->font();
  lf.setPointSizeF(7.5);
  chart->legend()->setFont(lf);
  QFont tf = chart->titleFont();
  tf.setPointSizeF(9);
  chart->setTitleFont(tf);
  chart->setAnimationOptions(QChart::NoAnimation);  // animations cost UI time on every update
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumHeight(170);
  // Axis labels change width as data arrives; the charts must not resize the dock (and with
  // it the 3D view, whose software-GL re-render would stall the UI thread).
  view->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  view->setMinimumWidth(220);
  return view;
}

// Ticks at round values (1, 2 or 5 x 10^k, about five of them) from a multiple of the tick step,
// labelled with as many decimals as the step needs: 0, 0.1, 0.2 rather than 0.101, 0.201.
void setNiceRange(QValueAxis* a, double lo, double hi, bool integers = false) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / 5.0;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  if (integers) step = std::max(1.0, std::round(step));
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  a->setTickType(QValueAxis::TicksDynamic);
  a->setTickAnchor(0);
  a->setTickInterval(step);
  a->setRange(lo, hi);
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  a->setLabelFormat(QString("%.%1f").arg(decimals));
}

QValueAxis* axis(QChart* chart, Qt::Alignment where, const QString& title) {
  auto* a = new QValueAxis(chart);
  a->setTitleText(title);
  a->setLabelFormat("%.3g");
  a->setTickCount(5);
  QFont f = a->labelsFont();
  f.setPointSizeF(7.5);
  a->setLabelsFont(f);
  f.setPointSizeF(8);
  a->setTitleFont(f);
  chart->addAxis(a, where);
  return a;
}

std::unique_ptr<DecimatedSeries> line(QChart* chart, const QString& name, QColor color, QValueAxis* x, QValueAxis* y,
                                      Qt::PenStyle style = Qt::SolidLine) {
  auto* s = new QLineSeries(chart);
  s->setName(name);
  s->setPen(QPen(color, 2, style));
  chart->addSeries(s);
  s->attachAxis(x);
  s->attachAxis(y);
  return std::make_unique<DecimatedSeries>(s);
}
} // namespace

TrainingCharts::TrainingCharts(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);

  auto* loss = new QChart;
  loss->setTitle(tr("Loss and Dice per step"));
  lossX_ = axis(loss, Qt::AlignBottom, QString());
  lossY_ = axis(loss, Qt::AlignLeft, tr("loss"));
  diceY_ = axis(loss, Qt::AlignRight, tr("Dice"));
  diceY_->setRange(0, 1);
  trainLoss_ = line(loss, tr("train loss"), QColor(240, 120, 90), lossX_, lossY_);
  valLoss_ = line(loss, tr("val loss"), QColor(250, 200, 80), lossX_, lossY_, Qt::DashLine);
  trainDice_ = line(loss, tr("train Dice"), QColor(90, 200, 140), lossX_, diceY_);
  valDice_ = line(loss, tr("val Dice"), QColor(100, 160, 255), lossX_, diceY_, Qt::DashLine);
  lossView_ = makeView(loss, this);
  layout->addWidget(lossView_, 3);

  auto* mem = new QChart;
  mem->setTitle(tr("Device memory, peak per step (MiB over seconds)"));
  memX_ = axis(mem, Qt::AlignBottom, QString());
  memY_ = axis(mem, Qt::AlignLeft, tr("MiB"));
  sum_ = line(mem, tr("all devices"), QColor(220, 220, 220), memX_, memY_, Qt::DotLine);
  mem->removeSeries(sum_->series());  // shown once a step reports several devices
  memView_ = makeView(mem, this);
  layout->addWidget(memView_, 3);
  showTotals_ = new QCheckBox(tr("Scale to device totals"), this);
  showTotals_->setToolTip(tr("Include each device's capacity line in the memory chart's range"));
  connect(showTotals_, &QCheckBox::toggled, this, &TrainingCharts::fitAxes);
  layout->addWidget(showTotals_);

  auto* host = new QChart;
  host->setTitle(tr("Host memory, process RSS (MiB over seconds)"));
  hostX_ = axis(host, Qt::AlignBottom, tr("s"));
  hostY_ = axis(host, Qt::AlignLeft, tr("MiB"));
  host_ = line(host, tr("RSS"), QColor(200, 130, 230), hostX_, hostY_);
  host->legend()->hide();
  hostView_ = makeView(host, this);
  layout->addWidget(hostView_, 2);

  // Before the first run (and after a reset) each chart says what will appear in it, rather
  // than showing empty axes.
  auto hint = [this](QChartView* view, const QString& text, std::function<bool()> empty) {
    auto* item = new QGraphicsTextItem(text, view->chart());
    item->setDefaultTextColor(QColor("#8b949e"));
    QTextOption centred(Qt::AlignCenter);
    centred.setWrapMode(QTextOption::WordWrap);
    item->document()->setDefaultTextOption(centred);
    hints_.push_back({view, item, std::move(empty)});
    connect(view->chart(), &QChart::plotAreaChanged, this, &TrainingCharts::placeHints);
  };
  hint(lossView_, tr("No run yet. Start training: the loss and Dice of every step, and of each validation, "
                     "appear here."),
       [this] { return trainLoss_->size() == 0 && valLoss_->size() == 0; });
  hint(memView_, tr("The peak memory of every device in each step appears here, with its capacity "
                    "(Scale to device totals)."),
       [this] { return memory_.isEmpty(); });  // a device's series exists from its first point on
  hint(hostView_, tr("This process's resident memory during a run appears here."),
       [this] { return host_->size() == 0; });
  placeHints();

  // A few redraws a second keep the charts live without the UI thread redrawing per step.
  flushTimer_.setInterval(250);
  connect(&flushTimer_, &QTimer::timeout, this, &TrainingCharts::flush);
  flushTimer_.start();
}

TrainingCharts::~TrainingCharts() = default;

void TrainingCharts::placeHints() {
  for (auto& h : hints_) {
    const bool empty = h.empty();
    h.text->setVisible(empty);
    // Axes without data are a grid of made-up ranges behind the line: shown once points arrive.
    for (auto* a : h.view->chart()->axes())
      if (a->isVisible() == empty) a->setVisible(!empty);
    if (!empty) continue;
    const QRectF area = h.view->chart()->plotArea();
    h.text->setTextWidth(std::max(80.0, area.width() - 24));
    const QRectF box = h.text->boundingRect();
    h.text->setPos(area.center().x() - box.width() / 2, area.center().y() - box.height() / 2);
  }
}

QString TrainingCharts::emptyHint(const QChartView* view) const {
  for (const auto& h : hints_)
    if (h.view == view) return h.text->isVisible() ? h.text->toPlainText() : QString();
  return {};
}

DecimatedSeries* TrainingCharts::memorySeries(const QString& device) {
  if (auto it = memory_.find(device); it != memory_.end()) return it->get();
  static const QColor colors[] = {QColor(90, 200, 140), QColor(100, 160, 255), QColor(240, 150, 60), QColor(230, 90, 90)};
  const QColor c = colors[memory_.size() % 4];
  colors_.insert(device, c);
  auto* chart = memView_->chart();
  std::shared_ptr<DecimatedSeries> s = line(chart, device, c, memX_, memY_);
  memory_.insert(device, s);
  return s.get();
}

void TrainingCharts::setPlanned(const QString& device, std::int64_t bytes) {
  memorySeries(device);  // the device's colour (its points come with the steps)
  auto it = planned_.find(device);
  if (it == planned_.end()) {
    auto* s = new QLineSeries(memView_->chart());
    s->setName(tr("%1 plan").arg(device));
    // Lighter and dashed: drawn over the measured line, it still shows where the two agree.
    s->setPen(QPen(colors_.value(device).lighter(170), 1.5, Qt::DashLine));
    memView_->chart()->addSeries(s);
    s->attachAxis(memX_);
    s->attachAxis(memY_);
    it = planned_.insert(device, {s, 0.0});
  }
  it->mib = double(bytes) / kMiB;
  fitAxes();
}

double TrainingCharts::plannedMiB(const QString& device) const {
  const auto it = planned_.find(device);
  return it == planned_.end() ? -1.0 : it->mib;
}

const DecimatedSeries* TrainingCharts::deviceMemory(const QString& device) const {
  const auto it = memory_.find(device);
  return it == memory_.end() ? nullptr : it->get();
}

void TrainingCharts::reset() {
  for (auto* s : {trainLoss_.get(), valLoss_.get(), trainDice_.get(), valDice_.get(), host_.get(), sum_.get()}) s->clear();
  for (auto& s : memory_) memView_->chart()->removeSeries(s->series());
  for (auto& s : totals_) memView_->chart()->removeSeries(s->series());
  if (sum_->series()->chart()) memView_->chart()->removeSeries(sum_->series());
  for (auto& p : planned_) {
    memView_->chart()->removeSeries(p.series);
    delete p.series;
  }
  memory_.clear();
  totals_.clear();
  colors_.clear();
  planned_.clear();
  t0_ = -1;
  seconds_ = 0;
  fitAxes();
}

void TrainingCharts::addStep(const engine::StepMetrics& m) {
  const double x = double(m.step);
  trainLoss_->append(x, m.loss);
  trainDice_->append(x, m.meanDice);
  seconds_ += m.seconds;
  double sum = 0;
  int shown = 0;
  auto add = [&](const QString& name, std::int64_t peak, std::int64_t total) {
    auto* s = memorySeries(name);
    s->append(seconds_, double(peak) / kMiB);
    if (total > 0) {  // a line at the device's capacity (other ranks report none)
      auto t = totals_.find(name);
      if (t == totals_.end())
        t = totals_.insert(name, line(memView_->chart(), tr("%1 total").arg(name), colors_.value(name).darker(140), memX_,
                                      memY_, Qt::DashLine));
      t.value()->append(seconds_, double(total) / kMiB);
    }
    sum += double(peak) / kMiB;
    ++shown;
  };
  // Over ranks: this process is rank 0 (its devices measured here, with their totals), each
  // other rank's device from the peak that rank reported.
  const int here = m.ranks.empty() ? -1 : 0;
  for (const auto& d : m.memory) add(QString::fromStdString(engine::plannerDeviceName(here, d.device)), d.peak, d.total);
  for (const auto& r : m.ranks)
    if (r.rank > 0) add(QString::fromStdString(engine::plannerDeviceName(r.rank, r.device)), r.peakBytes, 0);
  if (shown > 1) {
    if (!sum_->series()->chart()) {
      memView_->chart()->addSeries(sum_->series());
      sum_->series()->attachAxis(memX_);
      sum_->series()->attachAxis(memY_);
    }
    sum_->append(seconds_, sum);
  }
  host_->append(seconds_, double(m.hostRss) / kMiB);
}

void TrainingCharts::addValidation(const engine::ValidationMetrics& m) {
  valLoss_->append(double(m.step), m.loss);
  valDice_->append(double(m.step), m.meanDice);
}

void TrainingCharts::flush() {
  for (auto* s : {trainLoss_.get(), valLoss_.get(), trainDice_.get(), valDice_.get(), host_.get(), sum_.get()}) s->flush();
  for (auto& s : memory_) s->flush();
  for (auto& s : totals_) s->flush();
  fitAxes();
}

void TrainingCharts::fitAxes() {
  const double steps = std::max({1.0, trainLoss_->maxX(), valLoss_->maxX()});
  setNiceRange(lossX_, 0, steps, true);
  double lossMax = std::max(trainLoss_->size() ? trainLoss_->maxY() : 1.0, valLoss_->size() ? valLoss_->maxY() : 0.0);
  setNiceRange(lossY_, 0, std::max(1e-3, lossMax * 1.05));
  double memMax = sum_->size() ? sum_->maxY() : 1.0, tMax = std::max(1.0, seconds_);
  for (auto& s : memory_) memMax = std::max(memMax, s->maxY());
  for (auto& p : planned_) {
    memMax = std::max(memMax, p.mib);
    p.series->replace(QList<QPointF>{{0, p.mib}, {tMax, p.mib}});
  }
  if (showTotals_->isChecked())
    for (auto& t : totals_) memMax = std::max(memMax, t->maxY());
  setNiceRange(memX_, 0, tMax);
  setNiceRange(memY_, 0, memMax * 1.1);
  setNiceRange(hostX_, 0, tMax);
  setNiceRange(hostY_, host_->size() ? host_->minY() * 0.9 : 0, host_->size() ? host_->maxY() * 1.05 : 1);
  placeHints();
}

} // namespace splitseg::ui
