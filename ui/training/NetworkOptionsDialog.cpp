#include "ui/training/NetworkOptionsDialog.h"
#include "core/base/JsonText.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>

#include <algorithm>

namespace splitseg::ui {

NetworkOptionsDialog::NetworkOptionsDialog(const std::string& architecture, const nlohmann::json& defaults,
                                           const nlohmann::json& current,
                                           std::function<std::string(const nlohmann::json&)> check, QWidget* parent)
    : QDialog(parent), base_(current.is_object() ? current : nlohmann::json::object()), check_(std::move(check)) {
  setWindowTitle(tr("%1 options").arg(QString::fromStdString(architecture)));
  auto* form = new QFormLayout(this);
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    const auto& key = it.key();
    const auto value = base_.contains(key) ? base_[key] : it.value();
    QWidget* w = nullptr;
    if (it.value().is_boolean()) {
      auto* c = new QCheckBox(this);
      c->setChecked(value.is_boolean() && value.get<bool>());
      w = c;
    } else if (it.value().is_number_integer()) {
      auto* s = new QSpinBox(this);
      s->setRange(0, 1 << 20);  // the factory applies the architecture's own bounds
      s->setValue(value.is_number_integer() ? static_cast<int>(std::clamp<std::int64_t>(value.get<std::int64_t>(), 0, 1 << 20)) : 0);
      w = s;
    } else if (it.value().is_number()) {
      auto* d = new QDoubleSpinBox(this);
      d->setDecimals(4);
      d->setRange(-1e6, 1e6);
      d->setValue(value.is_number() ? value.get<double>() : 0.0);
      w = d;
    } else if (it.value().is_string()) {
      text_.insert(key);
      w = new QLineEdit(QString::fromStdString(value.is_string() ? value.get<std::string>() : ""), this);
    } else {  // lists and objects: their JSON text
      w = new QLineEdit(QString::fromStdString(value.dump()), this);
      w->setToolTip(tr("JSON, e.g. %1").arg(QString::fromStdString(it.value().dump())));
    }
    w->setObjectName(QString::fromStdString(key));
    fields_[key] = w;
    form->addRow(QString::fromStdString(key), w);
  }
  problem_ = new QLabel(this);
  problem_->setObjectName("problem");
  problem_->setStyleSheet("color: #ff6b6b;");
  problem_->setWordWrap(true);
  form->addRow(problem_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &NetworkOptionsDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  form->addRow(buttons);
}

QWidget* NetworkOptionsDialog::field(const std::string& key) const {
  const auto it = fields_.find(key);
  return it == fields_.end() ? nullptr : it->second;
}

nlohmann::json NetworkOptionsDialog::options() const {
  auto out = base_;
  for (const auto& [key, w] : fields_) {
    if (auto* c = qobject_cast<QCheckBox*>(w))
      out[key] = c->isChecked();
    else if (auto* s = qobject_cast<QSpinBox*>(w))
      out[key] = s->value();
    else if (auto* d = qobject_cast<QDoubleSpinBox*>(w))
      out[key] = d->value();
    else if (auto* e = qobject_cast<QLineEdit*>(w)) {
      const auto text = e->text().toStdString();
      if (text_.count(key)) {
        out[key] = text;
        continue;
      }
      // A list field holds JSON; text that is not stays text, so the factory names the option.
      try {
        out[key] = parseJson(text, key);
      } catch (const JsonRefused&) {
        out[key] = text;
      }
    }
  }
  return out;
}

void NetworkOptionsDialog::accept() {
  const auto why = check_ ? check_(options()) : std::string();
  problem_->setText(QString::fromStdString(why));
  if (why.empty()) QDialog::accept();
}

} // namespace splitseg::ui
