#pragma once
// Runs a StagedNetwork with its stages on the devices a Placement names. Each stage's inputs
// (skip tensors included) are moved to the stage's device; backward crosses devices through
// autograd. The only code that moves model parts between devices.
#include "core/model/StagedNetwork.h"
#include "core/placement/Placement.h"

#include <torch/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>

namespace splitseg::engine {

enum class Precision { FP32, BF16 };
std::string toString(Precision p);
Precision precisionFromString(const std::string& s);

struct ExecutorOptions {
  Precision precision = Precision::FP32;
  // Stages run without keeping internal activations; recomputed in backward.
  std::set<std::string> checkpointStages;
};

class SplitExecutor {
public:
  SplitExecutor(std::shared_ptr<model::StagedNetwork> network, placement::Placement placement,
                ExecutorOptions options = {});

  // Moves the stages to their (new) devices. Optimizer state must follow: see Trainer.
  void setPlacement(const placement::Placement& placement);
  const placement::Placement& placement() const { return placement_; }
  void setOptions(const ExecutorOptions& options) { options_ = options; }
  const ExecutorOptions& options() const { return options_; }

  // input on any device; returns the head's output (fp32) on the head's device.
  torch::Tensor forward(const torch::Tensor& input);

  torch::Device inputDevice() const;
  torch::Device outputDevice() const;
  model::StagedNetwork& network() { return *network_; }
  std::shared_ptr<model::StagedNetwork> networkPtr() { return network_; }
  // Stage running now (forward) — names the stage in out-of-memory errors.
  const std::string& currentStage() const { return currentStage_; }

  // Hook called after each stage's forward (the trainer checks memory budgets there).
  using StageCallback = std::function<void(const std::string& stage, const torch::Device& device)>;
  void setAfterStage(StageCallback callback) { afterStage_ = std::move(callback); }
  // Called during backward when the gradient reaches a stage's output, i.e. as that stage's
  // backward begins (names the stage in out-of-memory errors raised in backward).
  using BackwardCallback = std::function<void(const std::string& stage)>;
  void setBackwardHook(BackwardCallback callback) { backwardHook_ = std::move(callback); }

private:
  torch::Tensor moveTo(const torch::Tensor& t, const torch::Device& d) const;

  std::shared_ptr<model::StagedNetwork> network_;
  placement::Placement placement_;
  ExecutorOptions options_;
  std::vector<model::StageSpec> specs_;
  std::vector<torch::Device> stageDevices_;
  std::string currentStage_;
  StageCallback afterStage_;
  BackwardCallback backwardHook_;
};

} // namespace splitseg::engine
