#pragma once
// The options of a registry architecture as a form: one field per option of its defaults
// (integers, decimals, switches, text; lists as JSON), filled with the current values. OK builds
// the network through the registry first, so options the factory refuses keep the dialog open
// with its one-line reason.
#include <nlohmann/json.hpp>

#include <QDialog>

#include <functional>
#include <map>
#include <set>
#include <string>

class QLabel;
class QWidget;

namespace splitseg::ui {

class NetworkOptionsDialog : public QDialog {
  Q_OBJECT
public:
  // `defaults`: the architecture's default options (their keys and types make the form);
  // `current`: the values to show (keys the defaults lack are kept as they are).
  // `check` returns "" when the options build a network, else why not.
  NetworkOptionsDialog(const std::string& architecture, const nlohmann::json& defaults, const nlohmann::json& current,
                       std::function<std::string(const nlohmann::json&)> check, QWidget* parent = nullptr);

  nlohmann::json options() const;  // what the form holds now
  QWidget* field(const std::string& key) const;  // tests

  void accept() override;

private:
  nlohmann::json base_;
  std::map<std::string, QWidget*> fields_;
  std::set<std::string> text_;  // options whose value is text (the rest of the line edits hold JSON)
  std::function<std::string(const nlohmann::json&)> check_;
  QLabel* problem_;
};

} // namespace splitseg::ui
