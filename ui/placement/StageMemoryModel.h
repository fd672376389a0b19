#pragma once
// Predicted memory per stage and per device, and the tensors that cross devices each step,
// for the session's network, placement and run settings. Numbers come from core/placement's
// MemoryPlanner (a tensor-level replay of the step); when the network's structure cannot be
// extracted, an analytic estimate of saved activations stands in (marked "est.").
#include "core/placement/MemoryPlanner.h"
#include "ui/session/Session.h"

#include <map>
#include <optional>
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
  std::map<std::string, std::int64_t> stageBytes;   // parameters + gradients + optimizer + saved activations
  std::map<std::string, std::int64_t> deviceBytes;  // predicted peak of the step on that device
  std::vector<CrossTransfer> transfers;
  bool fromPlanner = false;
  std::optional<placement::MemoryPlan> plan;        // the planner's full answer
};

class StageMemoryModel {
public:
  static PlacementEstimate estimate(const Session& session);
  // The planner's request for the session's current state (devices, settings, placement).
  static placement::PlanRequest request(const Session& session);

private:
  static void analytic(const Session& session, PlacementEstimate& out);
  static void transfers(const Session& session, PlacementEstimate& out);
};

} // namespace splitseg::ui
