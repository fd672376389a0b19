#pragma once
// The open work of one main window: image, ground-truth label and prediction, the network
// and its placement over the devices, the run settings the placement view and the panels
// share, and the undo stack of the edits a person makes to the placement and the run
// (MoveStagesCommand, RunEditCommand). Views observe it through signals.
#include "core/engine/DeviceSpeed.h"
#include "core/engine/Devices.h"
#include "core/planner/NetworkStructure.h"
#include "core/placement/Placement.h"
#include "core/run/RunSpec.h"
#include "core/volume/Volume.h"
#include "ui/session/RankHost.h"
#include "ui/session/StageInfo.h"

#include <QMap>
#include <QObject>
#include <QString>
#include <QVector>

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>

class QUndoStack;

namespace splitseg::model { class StagedNetwork; }

namespace splitseg::ui {

class Session : public QObject {
  Q_OBJECT
public:
  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  std::shared_ptr<const Volume> image() const { return image_; }
  const QString& imageSource() const { return imageSource_; }
  void setImage(std::shared_ptr<const Volume> image, const QString& source);
  std::shared_ptr<const Volume> groundTruth() const { return groundTruth_; }
  const QString& groundTruthSource() const { return groundTruthSource_; }
  void setGroundTruth(std::shared_ptr<const Volume> label, const QString& source);
  // The dataset folder the data panel opened ("" when none); training can use all its cases.
  const QString& datasetFolder() const { return datasetFolder_; }
  void setDatasetFolder(const QString& folder) { datasetFolder_ = folder; Q_EMIT datasetChanged(); }
  std::shared_ptr<const Volume> prediction() const { return prediction_; }
  void setPrediction(std::shared_ptr<const Volume> prediction);

  // The network the placement view shows, training trains and review runs.
  std::shared_ptr<model::StagedNetwork> network() const { return network_; }
  void setNetwork(std::shared_ptr<model::StagedNetwork> network);
  // Builds a network through the registry (the one network factory) and makes it the
  // session's network; throws InvalidArgument for bad options.
  void createNetwork(const std::string& architecture, const nlohmann::json& options);
  // The U-Net with these sizes and the registry's other defaults.
  void createUNet(int baseChannels, int depth, int inChannels = 1, int outChannels = 1);
  const QVector<StageInfo>& stages() const { return stages_; }
  // The network's layers as plain numbers for the memory planner (null if not extractable).
  std::shared_ptr<const planner::NetworkStructure> structure() const { return structure_; }
  std::vector<std::string> stageNames() const;
  const StageInfo* stage(const std::string& name) const;

  const QVector<engine::DeviceInfo>& devices() const { return devices_; }
  const engine::DeviceInfo* device(const std::string& name) const;
  void setDevices(const QVector<engine::DeviceInfo>& devices);
  // A what-if GPU: shown and planned for, never run on. Returns its name (the next "cuda:N").
  std::string addPlanningDevice(std::int64_t totalBytes);
  void removePlanningDevice(const std::string& name);
  std::vector<std::string> runnableDevices() const;
  // A stage placed (whole or a shard of it) on a planning-only GPU, which no run can use: that
  // device, with the stage in `stage`; null when every stage is on a runnable device.
  const engine::DeviceInfo* planningOnlyPlacement(std::string* stage = nullptr) const;
  // Training speeds measured on this machine's devices (the placement view's Measure speed),
  // by local device name ("cpu", "cuda:0"); a rank's "r1:cpu" is taken to be like this
  // machine's CPU. The planner's defaults stand where none is measured. A new network or a
  // change of precision clears them (they were measured with the old ones).
  const std::map<std::string, engine::MeasuredSpeed>& measuredSpeeds() const { return speeds_; }
  void setMeasuredSpeeds(std::map<std::string, engine::MeasuredSpeed> speeds);
  const engine::MeasuredSpeed* measuredSpeed(const std::string& device) const;

  // Ranks (other processes, here or on other machines): each adds its device as a column
  // "r<rank>:<device>". The next free rank is taken; returns the column's device name. A local
  // rank's device is one of this machine's (its memory as detected); a remote one's as declared.
  const std::vector<RankHost>& hosts() const { return hosts_; }
  // The ranks on other machines (their workers join this one): they do not share this host's cores.
  std::set<int> remoteRanks() const;
  std::string addRank(RankHost host);
  // Stages on the removed rank go back to the default device (as for a planning-only GPU).
  void removeRank(int rank);
  void setHosts(const std::vector<RankHost>& hosts);
  // The port rank 0 (the workstation) serves the rendezvous on when a remote worker takes part
  // (runs with local ranks only take a free one).
  int rendezvousPort() const { return rendezvousPort_; }
  void setRendezvousPort(int port) { rendezvousPort_ = port; }
  // The secret this workstation's runs over ranks share with their workers (RunSecret.h). Made
  // once per workstation process, never saved: a session file given to someone admits no one.
  const std::string& runSecret() const;
  // Why a rank stopped or cannot join ("" when none): shown on its column until the next run.
  QString rankProblem(int rank) const { return rankProblems_.value(rank); }
  void setRankProblem(int rank, const QString& problem);
  void clearRankProblems();
  // Where stages go unless placed: the first runnable device (a GPU when there is one).
  std::string defaultDevice() const;

  const placement::Placement& placement() const { return placement_; }
  // Replaces the placement (undo commands call this; views react to placementChanged).
  void setPlacement(const placement::Placement& placement);
  // Placement moves and run edits, one step per edit a person makes (setPlacement and setRun
  // themselves push nothing: a view's edit goes through a command, ui/session/RunEditCommand.h).
  QUndoStack* undoStack() const { return undo_; }

  // The run description the panels edit (placement view: patch, batch, per-stage precision,
  // recompute; training panel: schedule, data, preprocessing; review: window). Workers get a
  // copy; sessions and checkpoints store it. Its network and placement follow setNetwork and
  // setPlacement. The views' edits go through the undo stack (runedit::setPatch, ...), which
  // calls setRun; runChanged tells every view.
  const run::RunSpec& run() const { return run_; }
  void setRun(const run::RunSpec& run);

  // True while a training or inference run owns the network (placement edits wait).
  bool busy() const { return busy_; }
  void setBusy(bool busy);

Q_SIGNALS:
  void imageChanged();
  void groundTruthChanged();
  void predictionChanged();
  void datasetChanged();
  void networkChanged();
  void devicesChanged();
  void speedsChanged();
  void placementChanged();
  void runChanged();
  void busyChanged(bool busy);
  void rankProblemsChanged();
  void message(const QString& text);

private:
  void releaseDevice(const std::string& name);  // its stages to the default device

  std::shared_ptr<const Volume> image_, groundTruth_, prediction_;
  QString imageSource_, groundTruthSource_, datasetFolder_;
  std::shared_ptr<model::StagedNetwork> network_;
  QVector<StageInfo> stages_;
  std::shared_ptr<const planner::NetworkStructure> structure_;
  QVector<engine::DeviceInfo> devices_;
  std::map<std::string, engine::MeasuredSpeed> speeds_;
  placement::Placement placement_;
  run::RunSpec run_;
  QUndoStack* undo_;
  int planningCount_ = 0;
  std::vector<RankHost> hosts_;
  int rendezvousPort_ = 29500;  // torchrun's default
  QMap<int, QString> rankProblems_;
  bool busy_ = false;
};

} // namespace splitseg::ui
