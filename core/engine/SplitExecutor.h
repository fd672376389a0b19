#pragma once
// Runs a StagedNetwork with its stages on the devices a Placement names. Each stage's inputs
// (skip tensors included) are moved to the stage's device; backward crosses devices through
// autograd. The only code that moves model parts between devices.
#include "core/model/StagedNetwork.h"
#include "core/placement/Placement.h"
#include "core/placement/Precision.h"
#include "core/placement/ShardLayout.h"
#include "core/engine/Recompute.h"
#include "core/engine/StepTimeline.h"

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>
#include <string>

namespace splitseg::engine {

// The layout switch below for one module: its 5-D parameters not yet channels-last become so;
// returns those it converted, which restoreLayout gives back their plain layout.
std::vector<torch::Tensor> toChannelsLast(torch::nn::Module& module);
void restoreLayout(std::vector<torch::Tensor>& converted);

class SplitExecutor {
public:
  // precision and recompute (stages with activation checkpointing) as in the run description.
  SplitExecutor(std::shared_ptr<model::StagedNetwork> network, placement::Placement placement,
                placement::StagePrecisions precision = {}, std::set<std::string> recompute = {});

  // Moves the stages to their (new) devices. Optimizer state must follow: see Trainer.
  void setPlacement(const placement::Placement& placement);
  const placement::Placement& placement() const { return placement_; }
  void setPrecision(const placement::StagePrecisions& precision) { precision_ = precision; }
  const placement::StagePrecisions& precision() const { return precision_; }
  void setRecompute(const std::set<std::string>& stages) { recompute_ = stages; }
  const std::set<std::string>& recompute() const { return recompute_; }
  // Host offload of the recomputed stages' saved inputs (RunSpec::offload; see OffloadChain).
  void setOffload(bool enabled, OffloadChain::Options options = {}) {
    offload_ = enabled;
    offloadOptions_ = options;
  }
  bool offload() const { return offload_; }
  // The chain of the last training forward (null without offload): what it copied, for tests.
  std::shared_ptr<const OffloadChain> lastOffload() const { return lastOffload_; }

  // input on any device; returns the head's output (fp32) on the head's device. A bf16 stage
  // runs under autocast; an fp32 stage gets bf16 inputs (from a bf16 stage) cast up first.
  torch::Tensor forward(const torch::Tensor& input);

  // Sharded stages ("dec0=cuda:0+cuda:1"): the axis their slabs are cut along, and explicit slab
  // sizes (planes at full resolution) per placement entry; entries without sizes are cut evenly
  // on multiples of the pooling factor.
  void setSharding(placement::ShardAxis axis, std::map<std::string, std::vector<std::int64_t>> slabSizes = {});
  placement::ShardAxis shardAxis() const { return shardAxis_; }
  // The slabs each sharded placement entry cuts a volume of `extent` planes (along the shard
  // axis) into. Throws InvalidArgument for a cut that does not work (thin slabs, boundaries off
  // the pooling factor, sizes that do not add up).
  std::map<std::string, placement::ShardLayout> shardLayouts(std::int64_t extent) const;

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
  // CPU convolutions run faster on channels-last (NDHWC) weights: oneDNN then keeps activations in
  // that layout instead of reordering them to its blocked layout and back at every convolution
  // (measured on CPU sliding-window inference; the Inferer turns it on for the duration of a
  // prediction; the Trainer as RunSpec::cpuLayout says). Converts the 5-D parameters of stages
  // placed on the CPU (`trainingStages`: only the unsharded fp32 ones, the layouts the planner
  // models); false restores exactly the tensors it converted. Call outside InferenceMode.
  void setCpuChannelsLast(bool enabled, bool trainingStages = false);
  bool cpuChannelsLast() const { return !channelsLast_.empty(); }
  // Sees each stage's output as it is produced (dtype and device checks in tests, diagnostics).
  using OutputObserver = std::function<void(const std::string& stage, const torch::Tensor& output)>;
  void setOutputObserver(OutputObserver observer) { outputObserver_ = std::move(observer); }

  // Records each stage's forward, transfer, recompute and backward spans into `recorder` (null:
  // off). Lanes are the placement's device names. A CUDA span ends with a synchronize of its
  // device, so its length is the device's and not the kernel launches' (that costs the overlap
  // of host and device; not measured yet: no GPU run). Backward spans run from the moment the
  // gradient reaches a stage's output to the moment it leaves the stage's inputs; call
  // finishTimeline after backward to write them.
  void setTimeline(TimelineRecorder* recorder);
  void finishTimeline(double backwardEnd);

private:
  struct BackwardMarks;
  // The phases of forward (SplitExecutor.cpp): per stage its inputs gathered or scattered, the
  // stage run whole or sharded, its output observed and hooked for backward's timeline.
  struct ForwardState;
  torch::Tensor whole(ForwardState& st, const std::string& name, const torch::Device& d) const;
  void stageInputs(ForwardState& st, std::size_t i, bool bf16, std::vector<torch::Tensor>& inputs,
                   std::vector<std::vector<torch::Tensor>>& slabInputs) const;
  void markBackwardEnds(ForwardState& st, std::size_t i, std::vector<torch::Tensor>& inputs,
                        std::vector<std::vector<torch::Tensor>>& slabInputs) const;
  void forwardStage(ForwardState& st, std::size_t i);
  torch::Tensor runWholeStage(std::size_t i, const std::vector<torch::Tensor>& inputs, bool bf16,
                              const std::shared_ptr<OffloadChain>& offload);
  void observeOutput(ForwardState& st, std::size_t i, const torch::Tensor& produced) const;
  void syncForTimeline(const std::vector<torch::Device>& devices) const;
  std::vector<std::string> lanesOf(std::size_t stage) const;
  torch::Tensor moveTo(const torch::Tensor& t, const torch::Device& d) const;

  std::shared_ptr<model::StagedNetwork> network_;
  placement::Placement placement_;
  placement::StagePrecisions precision_;
  std::set<std::string> recompute_;
  bool offload_ = false;
  OffloadChain::Options offloadOptions_;
  std::shared_ptr<const OffloadChain> lastOffload_;
  std::vector<model::StageSpec> specs_;
  std::vector<torch::Device> stageDevices_;             // the (first) device of each stage
  std::vector<std::vector<torch::Device>> stageShards_;  // every device of each stage, slab order
  placement::ShardAxis shardAxis_ = placement::ShardAxis::Depth;
  std::map<std::string, std::vector<std::int64_t>> slabSizes_;
  std::string currentStage_;
  StageCallback afterStage_;
  BackwardCallback backwardHook_;
  OutputObserver outputObserver_;
  std::vector<torch::Tensor> channelsLast_;  // parameters converted by setCpuChannelsLast(true)
  TimelineRecorder* timeline_ = nullptr;
  std::shared_ptr<BackwardMarks> marks_;  // shared with the gradient hooks of the last forward
  mutable int moves_ = 0;                 // tensors moveTo copied between devices
};

} // namespace splitseg::engine
