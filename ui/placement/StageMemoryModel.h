#pragma once
// Predicted memory per stage and per device, and the tensors that cross devices each step,
// for the session's network, placement and run — the memory planner's own numbers
// (core/placement, a tensor-level replay of the step). When the planner cannot plan (a size
// the network cannot take, a network without extractable structure), the view says why.
#include "core/planner/MemoryPlanner.h"
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
  bool skip = false;              // a second input of a stage (a U-Net skip from the encoder twin)
};

struct PlacementEstimate {
  std::map<std::string, std::int64_t> stageBytes;   // parameters + gradients + optimizer + saved activations
  std::map<std::string, std::int64_t> deviceBytes;  // predicted peak of the step on that device
  std::vector<CrossTransfer> transfers;
  std::optional<planner::MemoryPlan> plan;        // the planner's full answer
  std::shared_ptr<const planner::NetworkStructure> structure;  // the network planned (set with plan)
  std::string error;                                // why there is no plan
};

class StageMemoryModel {
public:
  static PlacementEstimate estimate(const Session& session);
  // The same for a snapshot (any thread: PlannerWorker).
  static PlacementEstimate estimate(const std::shared_ptr<const planner::NetworkStructure>& structure,
                                    const planner::PlanRequest& request);
  // The planner's request for the session's current state (devices, run, placement).
  static planner::PlanRequest request(const Session& session);
  // The session's devices as the planner takes them (measured speeds included).
  static std::vector<planner::DeviceSpec> devices(const Session& session);
  // What a prediction is planned on (Review, Evaluate dataset): those devices and every rank's the
  // placement names ("r0:cpu" planned like this host's), and the windows a pass holds (one in one
  // process; a micro-batch each over ranks, as the inference workers run them).
  static std::vector<planner::DeviceSpec> inferenceDevices(const Session& session);
  static int inferenceWindowsPerPass(const Session& session);
};

} // namespace splitseg::ui
