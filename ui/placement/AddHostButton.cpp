#include "ui/placement/AddHostButton.h"

#include "core/base/Units.h"
#include "core/placement/Placement.h"
#include "ui/session/Session.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QSysInfo>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QRegularExpression>
#include <QRegularExpressionValidator>
#include <QSpinBox>

namespace splitseg::ui {

AddHostButton::AddHostButton(Session* session, QWidget* parent) : QToolButton(parent), session_(session) {
  setObjectName("addHost");
  setText(tr("Add host…"));
  setToolTip(tr("Run stages in other processes: a rank on this machine, or a splitseg-cli worker on another "
                "machine (its devices become columns r<rank>:<device>)"));
  setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(this);
  connect(menu, &QMenu::aboutToShow, this, &AddHostButton::fillMenu);
  setMenu(menu);
  fillMenu();
}

void AddHostButton::fillMenu() {
  menu()->clear();
  for (const auto& d : session_->devices()) {
    if (d.planningOnly || placement::splitRank(d.name).rank >= 0) continue;
    auto* a = menu()->addAction(tr("Rank process on this machine — %1 (%2)")
                                    .arg(QString::fromStdString(d.name), QString::fromStdString(formatBytes(double(d.totalBytes)))));
    a->setObjectName(QString("localRank:%1").arg(QString::fromStdString(d.name)));
    connect(a, &QAction::triggered, this, [this, device = d.name] {
      RankHost h;
      h.device = device;
      try {
        session_->addRank(h);
      } catch (const std::exception& e) {
        Q_EMIT session_->message(QString::fromStdString(e.what()));
      }
    });
  }
  menu()->addSeparator();
  auto* remote = menu()->addAction(tr("Worker on another machine…"));
  remote->setObjectName("remoteRank");
  connect(remote, &QAction::triggered, this, &AddHostButton::askRemote);
}

void AddHostButton::askRemote() {
  QDialog dialog(this);
  dialog.setWindowTitle(tr("Worker on another machine"));
  auto* form = new QFormLayout(&dialog);
  auto* host = new QLineEdit(&dialog);
  host->setPlaceholderText("gpu-node-2");
  host->setValidator(new QRegularExpressionValidator(QRegularExpression("[A-Za-z0-9._:-]{1,253}"), host));
  auto* device = new QLineEdit("cuda:0", &dialog);
  auto* gib = new QDoubleSpinBox(&dialog);
  gib->setRange(1, 16384);
  gib->setValue(80);
  gib->setSuffix(" GiB");
  auto* port = new QSpinBox(&dialog);
  port->setRange(1024, 65535);
  port->setValue(session_->rendezvousPort());
  auto* command = new QLineEdit(&dialog);
  command->setReadOnly(true);
  command->setMinimumWidth(520);
  auto* problem = new QLabel(&dialog);
  problem->setStyleSheet("color: #ff6b6b;");
  form->addRow(tr("Host"), host);
  form->addRow(tr("Device there"), device);
  form->addRow(tr("Its memory"), gib);
  form->addRow(tr("Rendezvous port here"), port);
  form->addRow(tr("Start there"), command);
  form->addRow(problem);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
  form->addRow(buttons);
  int next = 1;
  for (const auto& h : session_->hosts()) next = std::max(next, h.rank + 1);
  auto refresh = [&] {
    QString why;
    try {
      placement::canonicalDevice(device->text().toStdString());
      if (placement::splitRank(device->text().toStdString()).rank >= 0) why = tr("name the device without a rank");
    } catch (const std::exception& e) {
      why = QString::fromStdString(e.what());
    }
    if (host->text().isEmpty()) why = tr("give the worker's host name or address");
    problem->setText(why);
    buttons->button(QDialogButtonBox::Ok)->setEnabled(why.isEmpty());
    // WORLD_SIZE: every rank the session knows, this one included (Start shows the exact lines).
    command->setText(QString::fromStdString(
        workerCommand(QSysInfo::machineHostName().toStdString(), port->value(), next, next + 1,
                      session_->runSecret())));
  };
  connect(host, &QLineEdit::textChanged, &dialog, refresh);
  connect(device, &QLineEdit::textChanged, &dialog, refresh);
  connect(port, qOverload<int>(&QSpinBox::valueChanged), &dialog, refresh);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  refresh();
  if (dialog.exec() != QDialog::Accepted) return;
  RankHost h;
  h.host = host->text().toStdString();
  h.device = device->text().toStdString();
  h.totalBytes = static_cast<std::int64_t>(gib->value() * 1024.0 * 1024.0 * 1024.0);
  session_->setRendezvousPort(port->value());
  try {
    session_->addRank(h);
  } catch (const std::exception& e) {
    Q_EMIT session_->message(QString::fromStdString(e.what()));
  }
}

} // namespace splitseg::ui
