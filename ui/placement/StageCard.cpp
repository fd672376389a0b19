#include "ui/placement/StageCard.h"

#include <QContextMenuEvent>

#include <QApplication>
#include <QHBoxLayout>
#include <QLabel>

#include <algorithm>
#include <QMouseEvent>
#include <QToolButton>
#include <QVBoxLayout>

namespace splitseg::ui {

StageCard::StageCard(const QString& stage, QWidget* parent) : QFrame(parent), stage_(stage) {
  setObjectName("stageCard");
  setFrameShape(QFrame::StyledPanel);
  setCursor(Qt::OpenHandCursor);
  setMinimumSize(140, 50);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(7, 4, 4, 4);
  layout->setSpacing(1);
  auto* top = new QHBoxLayout;
  top->setSpacing(2);  // compact: five device columns fit at 1440 pixels
  title_ = new QLabel(QString("<b>%1</b>").arg(stage.toHtmlEscaped()), this);
  top->addWidget(title_, 1);
  checkpoint_ = new QToolButton(this);
  checkpoint_->setText("CP");
  checkpoint_->setCheckable(true);
  checkpoint_->setAutoRaise(true);
  checkpoint_->setFixedWidth(checkpoint_->fontMetrics().horizontalAdvance("CP") + 8);
  checkpoint_->setToolTip(tr("Activation checkpointing: keep only the stage's input and recompute in backward"));
  connect(checkpoint_, &QToolButton::toggled, this, [this](bool on) { Q_EMIT checkpointToggled(stage_, on); });
  top->addWidget(checkpoint_);
  precision_ = new QToolButton(this);
  precision_->setObjectName("precisionToggle");
  precision_->setCheckable(true);
  precision_->setAutoRaise(true);
  precision_->setToolTip(tr("Precision of this stage: bf16 autocast (checked) or fp32; weights and optimizer stay fp32"));
  precision_->setStyleSheet("QToolButton { color: #9aa4b2; } QToolButton:checked { color: #1b1f24; background: #e8c15a; border-radius: 3px; }");
  precision_->setText("fp32");
  precision_->setFixedWidth(std::max(precision_->fontMetrics().horizontalAdvance("fp32"),
                                     precision_->fontMetrics().horizontalAdvance("bf16")) + 8);
  connect(precision_, &QToolButton::toggled, this, [this](bool on) {
    precision_->setText(on ? "bf16" : "fp32");
    Q_EMIT precisionToggled(stage_, on);
  });
  top->addWidget(precision_);
  layout->addLayout(top);
  details_ = new QLabel(this);
  details_->setStyleSheet("color: #9aa4b2; font-size: 10px;");
  layout->addWidget(details_);
  shards_ = new QLabel(this);
  shards_->setObjectName("shards");
  shards_->setStyleSheet("color: #e8c15a; font-size: 10px;");
  shards_->hide();
  layout->addWidget(shards_);
  for (auto* l : {title_, details_, shards_}) l->setAttribute(Qt::WA_TransparentForMouseEvents);
  refreshStyle();
}

void StageCard::setDetails(const QString& parameters, const QString& memory, const QString& tooltip) {
  details_->setText(QString("%1 · %2").arg(parameters, memory));
  setToolTip(tooltip);
}

QSize StageCard::sizeHint() const { return {190, shards_->isVisible() ? 72 : 56}; }

void StageCard::setShards(const QString& text) {
  shards_->setText(text);
  shards_->setVisible(!text.isEmpty());
  updateGeometry();
}

void StageCard::contextMenuEvent(QContextMenuEvent* e) { Q_EMIT contextMenuRequested(stage_, e->globalPos()); }

void StageCard::setSelected(bool selected) {
  if (selected == selected_) return;
  selected_ = selected;
  refreshStyle();
}

void StageCard::setCheckpointed(bool on) {
  const QSignalBlocker block(checkpoint_);
  checkpoint_->setChecked(on);
}

void StageCard::setBf16(bool on) {
  const QSignalBlocker block(precision_);
  precision_->setChecked(on);
  precision_->setText(on ? "bf16" : "fp32");
}

bool StageCard::isBf16() const { return precision_->isChecked(); }

QString StageCard::accentOf(const QString& stage) {
  if (stage.startsWith("dec")) return "#5ac18e";
  if (stage == "bottleneck") return "#e8c15a";
  if (stage == "head") return "#c77dd6";
  return "#5c8ee6";
}

void StageCard::refreshStyle() {
  const QString accent = accentOf(stage_);
  setStyleSheet(QString("#stageCard { background: %1; border: 2px solid %2; border-left: 6px solid %3; border-radius: 6px; }")
                    .arg(selected_ ? "#2d3b52" : "#242a33", selected_ ? "#e8c15a" : "#3a424e", accent));
}

void StageCard::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  pressed_ = true;
  dragging_ = false;
  pressPos_ = e->position().toPoint();
  Q_EMIT pressed(stage_, e->modifiers());
}

void StageCard::mouseMoveEvent(QMouseEvent* e) {
  if (!pressed_) return;
  if (!dragging_ && (e->position().toPoint() - pressPos_).manhattanLength() < QApplication::startDragDistance()) return;
  if (!dragging_) setCursor(Qt::ClosedHandCursor);
  dragging_ = true;
  Q_EMIT dragMoved(stage_, mapToGlobal(e->position().toPoint()));
}

void StageCard::mouseReleaseEvent(QMouseEvent* e) {
  if (!pressed_ || e->button() != Qt::LeftButton) return;
  pressed_ = false;
  setCursor(Qt::OpenHandCursor);
  dropModifiers_ = e->modifiers();
  if (dragging_) {
    dragging_ = false;
    Q_EMIT dragDropped(stage_, mapToGlobal(e->position().toPoint()));
  } else {
    Q_EMIT clicked(stage_, e->modifiers());
  }
}

} // namespace splitseg::ui
