#pragma once
// The whole run description (run::RunSpec) in one form: network, placement and memory, schedule,
// data and preprocessing, inference. The panels keep their quick controls; this is the one place
// where every field can be read and edited. Apply checks the run as the CLI does
// (RunSpec::validate, with the session's devices and stages) and lists every problem with its
// field; nothing changes until the run is valid.
#include <QDialog>
#include <QHash>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace splitseg::run {
struct RunSpec;
}

namespace splitseg::ui {

class Session;

class RunSettingsDialog : public QDialog {
  Q_OBJECT
public:
  explicit RunSettingsDialog(Session* session, QWidget* parent = nullptr);

  // Reads the form into the session. False (and the problems shown) when the run is not valid.
  bool apply();
  QStringList problems() const { return problems_; }

private:
  void load(const run::RunSpec& run);
  Session* session_;
  QStringList problems_;
  QComboBox* arch_;
  QLineEdit* options_;
  QLineEdit* placement_;
  QLineEdit* precision_;
  QLineEdit* recompute_;
  QCheckBox* offload_;
  QComboBox* cpuLayout_;
  QComboBox* shardAxis_;
  QSpinBox* micro_;
  QSpinBox* rankTimeout_;
  QCheckBox* timeline_;
  QSpinBox* patch_[3];
  QSpinBox* batch_;
  QSpinBox* steps_;
  QSpinBox* epochs_;
  QSpinBox* stepsPerEpoch_;
  QSpinBox* validateEvery_;
  QSpinBox* checkpointEvery_;
  QDoubleSpinBox* lr_;
  QComboBox* lrSchedule_;
  QLineEdit* seed_;
  QLineEdit* cpuBudget_;
  QComboBox* intensity_;
  QDoubleSpinBox* spacing_[3];
  QLineEdit* checkpoint_;
  QSpinBox* window_[3];
  QDoubleSpinBox* overlap_;
  QCheckBox* mirror_[3];  // test-time mirroring along x, y, z
  QCheckBox* keepLargest_;  // run.keepLargest
  QLabel* problemsLabel_;
  QHash<QDoubleSpinBox*, double> shown_;  // what load() displayed
};

} // namespace splitseg::ui
