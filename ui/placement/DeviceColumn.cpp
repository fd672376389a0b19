#include "ui/placement/DeviceColumn.h"

#include "core/base/Units.h"
#include "core/placement/Placement.h"
#include "ui/placement/SlabCard.h"
#include "ui/placement/StageCard.h"

#include <QTextDocument>
#include <QLabel>
#include <QPainter>
#include <QToolButton>
#include <QVBoxLayout>

namespace splitseg::ui {

DeviceColumn::DeviceColumn(const engine::DeviceInfo& device, QWidget* parent) : QFrame(parent), info_(device) {
  setObjectName("deviceColumn");
  setMinimumWidth(175);  // a card fits "bottleneck", CP and fp32 side by side
  setMaximumWidth(230);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(8, 8, 8, 8);
  layout->setSpacing(6);
  auto* head = new QHBoxLayout;
  title_ = new QLabel(this);
  rank_ = placement::splitRank(info_.name).rank;
  // The name and description can come from a session file or a rank's host: shown as text.
  QString title = QString("<b>%1</b>").arg(QString::fromStdString(info_.name).toHtmlEscaped());
  // A planning-only GPU says so in its description and with a dashed border: the title stays short.
  title_->setText(title);
  head->addWidget(title_, 1);
  if (info_.planningOnly || rank_ >= 0) {
    auto* remove = new QToolButton(this);
    remove->setObjectName("removeDevice");
    remove->setText("×");
    remove->setToolTip(rank_ >= 0 ? tr("Remove rank %1 (its stages go back to this process)").arg(rank_)
                                  : tr("Remove this planning-only GPU"));
    remove->setAutoRaise(true);
    connect(remove, &QToolButton::clicked, this, [this] { Q_EMIT removeRequested(QString::fromStdString(info_.name)); });
    head->addWidget(remove);
  }
  layout->addLayout(head);
  auto* desc = new QLabel(QString::fromStdString(info_.description), this);
  desc->setObjectName("deviceDescription");
  desc->setTextFormat(Qt::PlainText);
  desc->setStyleSheet(info_.planningOnly ? "color: #e8c15a; font-size: 11px;" : "color: #9aa4b2; font-size: 11px;");
  desc->setWordWrap(true);
  layout->addWidget(desc);
  problem_ = new QLabel(this);
  problem_->setObjectName("rankProblem");
  problem_->setStyleSheet("color: #ff6b6b; font-size: 11px;");
  problem_->setTextFormat(Qt::PlainText);  // a rank's own words
  problem_->setWordWrap(true);
  problem_->hide();
  layout->addWidget(problem_);
  memory_ = new QLabel(this);
  memory_->setStyleSheet("font-size: 11px;");
  memory_->setWordWrap(true);  // "predicted 844.6 MiB of 24.0 GiB" takes two lines in a narrow column
  layout->addWidget(memory_);
  // Room for the capacity bar painted below the memory text.
  layout->addSpacing(16);
  cards_ = new QVBoxLayout;
  cards_->setSpacing(6);
  layout->addLayout(cards_);
  layout->addStretch(1);
  if (info_.planningOnly)
    setToolTip(tr("A what-if GPU: the planner uses it, nothing can run on it"));
  setPredicted(0, false);
}

void DeviceColumn::addCard(StageCard* card) { cards_->addWidget(card); }
void DeviceColumn::addSlab(SlabCard* slab) { cards_->addWidget(slab); }

void DeviceColumn::setPredicted(std::int64_t bytes, bool fromPlanner) {
  predicted_ = bytes;
  over_ = info_.totalBytes > 0 && bytes > info_.totalBytes;
  const QString kind = fromPlanner ? tr("predicted") : tr("est.");
  QString text = tr("%1 %2 of %3").arg(kind, QString::fromStdString(formatBytes(double(bytes))),
                                        QString::fromStdString(formatBytes(double(info_.totalBytes))));
  if (over_) text = tr("<span style='color:#ff6b6b'><b>over capacity</b></span> · ") + text;
  memory_->setText(text);
  refreshStyle();
  update();
}

void DeviceColumn::setProblem(const QString& text) {
  problem_->setText(text);
  problem_->setToolTip(text.isEmpty() ? QString() : Qt::convertFromPlainText(text));
  problem_->setVisible(!text.isEmpty());
  refreshStyle();
}

QString DeviceColumn::problem() const { return problem_->text(); }

void DeviceColumn::setDropHighlight(bool on) {
  if (on == highlight_) return;
  highlight_ = on;
  refreshStyle();
}

void DeviceColumn::refreshStyle() {
  const bool lost = !problem_->text().isEmpty();
  const QString border = highlight_ ? "#e8c15a" : (over_ || lost) ? "#e05050" : info_.planningOnly ? "#8a7a3a" : "#3a424e";
  const QString style = info_.planningOnly ? "dashed" : "solid";
  setStyleSheet(QString("#deviceColumn { background: #1b1f26; border: 2px %1 %2; border-radius: 8px; }").arg(style, border));
}

void DeviceColumn::paintEvent(QPaintEvent* e) {
  QFrame::paintEvent(e);
  // Capacity bar under the memory text: fill = predicted / total.
  QPainter p(this);
  const QRect bar(10, memory_->geometry().bottom() + 6, width() - 20, 7);
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(50, 56, 66));
  p.drawRoundedRect(bar, 3, 3);
  if (info_.totalBytes > 0) {
    const double f = std::min(1.0, double(predicted_) / double(info_.totalBytes));
    p.setBrush(over_ ? QColor(224, 80, 80) : f > 0.8 ? QColor(232, 193, 90) : QColor(90, 193, 142));
    p.drawRoundedRect(QRect(bar.left(), bar.top(), int(bar.width() * f), bar.height()), 3, 3);
  }
}

} // namespace splitseg::ui
