#pragma once
// Predicted memory per stage and per device, and the tensors that cross devices each step,
// for the session's network, placement and run settings. Uses core/placement's planner when
// it is built in; otherwise an analytic estimate of saved activations (marked "est.").
#include "core/placement/Placement.h"
#include "ui/session/Session.h"

#include <map>
#include <string>
#include <vector>

namespace splitseg::ui {

struct CrossTransfer {
  std::string fromStage, toStage;
  std::string fromDevice, toDevice;
  std::int64_t bytesPerStep = 0;  // forward activation + backward gradient
  bool skip = false;              // a U-Net skip (encoder twin -> decoder)
};

struct PlacementEstimate {
  std::map<std::string, std::int64_t> stageBytes;   // parameters + optimizer + saved activations
  std::map<std::string, std::int64_t> deviceBytes;  // sum of its stages + received tensors
  std::vector<CrossTransfer> transfers;
  bool fromPlanner = false;
};

class StageMemoryModel {
public:
  static PlacementEstimate estimate(const QVector<StageInfo>& stages, const placement::Placement& placement,
                                    const RunSettings& settings);
};

} // namespace splitseg::ui
