#include "ui/mainwindow/DataPanel.h"

#include "core/base/Units.h"
#include "ui/render/TransferFunctionPreset.h"
#include "ui/render/ViewState.h"
#include "ui/session/Session.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QVBoxLayout>

namespace splitseg::ui {

DataPanel::DataPanel(Session* session, ViewState* viewState, QWidget* parent)
    : QWidget(parent), session_(session), viewState_(viewState) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);

  auto* open = new QGroupBox(tr("Data"), this);
  auto* ol = new QVBoxLayout(open);
  auto button = [&](const QString& text, const QString& tip, void (DataPanel::*sig)()) {
    auto* b = new QPushButton(text, open);
    b->setToolTip(tip);
    connect(b, &QPushButton::clicked, this, sig);
    ol->addWidget(b);
  };
  button(tr("Open file…"), tr("NIfTI, NRRD or MetaImage volume"), &DataPanel::openFileRequested);
  button(tr("Open folder…"), tr("A folder holding one image series"), &DataPanel::openFolderRequested);
  button(tr("Open DICOM series…"), tr("A folder of DICOM slices"), &DataPanel::openDicomRequested);
  button(tr("Open dataset…"), tr("MSD dataset.json or nnU-Net raw folder"), &DataPanel::openDatasetRequested);
  button(tr("Load label…"), tr("Ground-truth segmentation of the open volume"), &DataPanel::loadLabelRequested);
  layout->addWidget(open);

  info_ = new QLabel(tr("Nothing open"), this);
  info_->setWordWrap(true);
  info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(info_);

  casesLabel_ = new QLabel(tr("Cases"), this);
  cases_ = new QListWidget(this);
  cases_->setMaximumHeight(140);
  layout->addWidget(casesLabel_);
  layout->addWidget(cases_);
  connect(cases_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    Q_EMIT caseActivated(cases_->row(item));
  });
  setCasesVisible(false);

  auto* display = new QGroupBox(tr("Display"), this);
  auto* form = new QFormLayout(display);
  windowPreset_ = new QComboBox(display);
  for (const auto& p : ViewState::presets())
    windowPreset_->addItem(tr("%1 (%2/%3)").arg(p.name).arg(p.window).arg(p.level), QVariant::fromValue(QPointF(p.window, p.level)));
  windowPreset_->setToolTip(tr("Window/level preset; right-drag on a slice to adjust"));
  connect(windowPreset_, qOverload<int>(&QComboBox::activated), this, [this](int i) {
    const auto wl = windowPreset_->itemData(i).toPointF();
    viewState_->setWindowLevel(wl.x(), wl.y());
  });
  form->addRow(tr("Window/level"), windowPreset_);
  // Shows the preset in use, or the window itself after a drag or for a non-CT image (an empty
  // box looked like a fault).
  connect(viewState_, &ViewState::windowLevelChanged, this, [this] {
    int match = -1;
    for (int i = 0; i < windowPreset_->count(); ++i)
      if (windowPreset_->itemData(i).toPointF() == QPointF(viewState_->window(), viewState_->level())) match = i;
    // As the slices' corner shows it.
    windowPreset_->setPlaceholderText(tr("Custom (%1/%2)").arg(viewState_->window(), 0, 'f', 0).arg(viewState_->level(), 0, 'f', 0));
    windowPreset_->setCurrentIndex(match);
  });
  volumePreset_ = new QComboBox(display);
  for (const auto& p : TransferFunctionPreset::loadAll()) volumePreset_->addItem(p.name);
  connect(volumePreset_, qOverload<int>(&QComboBox::activated), this, &DataPanel::volumePresetChosen);
  form->addRow(tr("3D preset"), volumePreset_);
  layout->addWidget(display);

  layout->addWidget(new QLabel(tr("Recent files"), this));
  recent_ = new QListWidget(this);
  connect(recent_, &QListWidget::itemActivated, this,
          [this](QListWidgetItem* item) { Q_EMIT recentFileActivated(item->data(Qt::UserRole).toString()); });
  layout->addWidget(recent_, 1);

  connect(session_, &Session::imageChanged, this, &DataPanel::refreshInfo);
  connect(session_, &Session::groundTruthChanged, this, &DataPanel::refreshInfo);
  refreshInfo();
}

void DataPanel::setRecentFiles(const QStringList& files) {
  recent_->clear();
  for (const auto& f : files) {
    auto* item = new QListWidgetItem(QFileInfo(f).fileName(), recent_);
    item->setToolTip(f);
    item->setData(Qt::UserRole, f);
  }
}

void DataPanel::setCasesVisible(bool visible) {
  casesLabel_->setVisible(visible);
  cases_->setVisible(visible);
}

void DataPanel::setCases(const QStringList& cases) {
  cases_->clear();
  cases_->addItems(cases);
  setCasesVisible(!cases.isEmpty());
}

void DataPanel::refreshInfo() {
  const auto img = session_->image();
  if (!img) {
    info_->setText(tr("Nothing open"));
    return;
  }
  const auto& g = img->geometry();
  const auto r = img->range();
  QString text = tr("<b>%1</b><br>%2 × %3 × %4 voxels<br>spacing %5 × %6 × %7 mm<br>%8, range %9 … %10")
                     .arg(QFileInfo(session_->imageSource()).fileName().toHtmlEscaped())
                     .arg(g.size[0]).arg(g.size[1]).arg(g.size[2])
                     .arg(g.spacing[0], 0, 'g', 4).arg(g.spacing[1], 0, 'g', 4).arg(g.spacing[2], 0, 'g', 4)
                     .arg(QString::fromStdString(img->pixelType()))
                     .arg(r.first, 0, 'g', 5).arg(r.second, 0, 'g', 5);
  if (session_->groundTruth())
    text += tr("<br>label: %1").arg(QFileInfo(session_->groundTruthSource()).fileName().toHtmlEscaped());
  info_->setText(text);
  info_->setToolTip(session_->imageSource());
}

} // namespace splitseg::ui
