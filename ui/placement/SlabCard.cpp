#include "ui/placement/SlabCard.h"
#include "ui/placement/StageCard.h"

#include <QTextDocument>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>

namespace splitseg::ui {

SlabCard::SlabCard(const QString& stage, QWidget* parent) : QFrame(parent), stage_(stage) {
  setObjectName("slabCard");
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(7, 3, 4, 3);
  label_ = new QLabel(this);
  label_->setStyleSheet("color: #e8c15a; font-size: 10px;");
  layout->addWidget(label_);
  // The stage's accent (as its card) on a dashed frame: a part of a card, not a card of its own.
  const QString accent = StageCard::accentOf(stage_);
  setStyleSheet(QString("#slabCard { background: #20252d; border: 1px dashed %1; border-left: 4px solid %1; "
                        "border-radius: 5px; }")
                    .arg(accent));
}

void SlabCard::setSlab(int index, int count, std::int64_t planes, const QString& device) {
  QString text = tr("<b>%1</b> slab %2/%3").arg(stage_.toHtmlEscaped()).arg(index + 1).arg(count);
  if (planes > 0) text += tr(" · %1 planes").arg(planes);
  label_->setText(text);
  setToolTip(Qt::convertFromPlainText(tr("Slab %1 of %2 of %3, computed on %4; the stage's parameters live with its first slab")
                                          .arg(index + 1).arg(count).arg(stage_, device)));
}

QString SlabCard::text() const { return label_->text(); }

void SlabCard::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) Q_EMIT clicked(stage_);
  QFrame::mousePressEvent(e);
}

} // namespace splitseg::ui
