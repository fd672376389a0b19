#pragma once
// Internal to StepSimulator: the replay's state and its phases, split over StepSimulator.cpp (the
// step: setup, forward, loss, backward, optimizer), StepLayers.cpp (each layer's forward) and
// StepBackward.cpp (each op's backward and the ranks' stage boundaries).
#include "core/planner/StepSimulator.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace splitseg::planner::detail::replay {

using Dims = std::array<std::int64_t, 3>;

// Autograd's view of the step: storages (with reference counts, so a tensor shared by a ReLU's
// saved output and the next conv's saved input is counted once) and values (a tensor version
// that gradients flow to; an in-place ReLU makes a new value on the same storage).
struct Storage { int device; std::int64_t bytes; int refs; int owner; bool transfer; };
struct Value {
  int storage; std::int64_t channels; Dims dims; int dtype; int device; bool requiresGrad;
  bool view = false;  // a view produced by a layer (instance norm's output)
  bool cl = false;    // channels-last strides (CPU stages with channels-last weights)
};

enum class OpKind { Conv, Norm, ReLU, Pool, Dropout, Concat, Cast, Copy, Checkpoint };

struct Op {
  OpKind kind;
  int stage;
  std::vector<int> inputs;   // values
  int output;                // value
  std::vector<int> saved;    // storages this node keeps (one reference each)
  std::int64_t weightGradBytes = 0;
  std::int64_t backwardScratch = 0;
  bool inplaceOnView = false;  // ReLU in place on a view: its gradient goes through AsStrided + CopySlices
  bool offloaded = false;    // Checkpoint: inputs kept on the host until its backward
  std::vector<int> fetched = {};  // those inputs back on the device (values), once fetched
};

class Simulator {
public:
  explicit Simulator(const SimRequest& r) : r_(r), net_(*r.network), o_(*r.options) {
    const std::size_t nd = r.deviceIsCuda.size();
    cur_.assign(nd, 0);
    res_.devices.assign(nd, {});
    res_.stages.assign(net_.stages.size(), {});
    gradsDone_.assign(net_.stages.size(), 0);
    stageOut_.assign(net_.stages.size(), -1);
    stageHeld_.assign(net_.stages.size(), {});
    remoteGrads_.assign(net_.stages.size(), {});
    cpuOptions_.assign(nd, o_);
    for (std::size_t d = 0; d < nd && d < r.deviceThreads.size(); ++d)
      if (r.deviceThreads[d] > 0) cpuOptions_[d].cpuThreads = r.deviceThreads[d];
  }

  SimResult run();

private:
  std::int64_t voxels(const Dims& d) const { return d[0] * d[1] * d[2]; }
  std::int64_t bytesOf(const Value& v) const { return r_.batch * v.channels * voxels(v.dims) * v.dtype; }
  bool bf16(int stage) const { return r_.bf16.at(stage) != 0; }
  bool sharded(int stage) const { return !r_.stageSlab.empty() && r_.stageSlab.at(stage) > 0; }
  bool ranks() const { return !r_.deviceRank.empty(); }
  // Two devices in different ranks' processes: a tensor between them is sent and received.
  bool crossesRanks(int a, int b) const {
    return ranks() && r_.deviceRank.at(a) >= 0 && r_.deviceRank.at(b) >= 0 && r_.deviceRank.at(a) != r_.deviceRank.at(b);
  }
  // Kept until the step's sends complete, after the optimizer (ranks::Comm::flush).
  void holdToEnd(int storage) { heldToEnd_.push_back(storage); }
  int actBytes(int stage) const { return bf16(stage) ? 2 : 4; }
  const PlannerOptions& cpuOptions(int dev) const { return cpuOptions_.at(static_cast<std::size_t>(dev)); }
  std::int64_t labelBytes() const { return r_.batch * voxels(r_.size) * 8; }  // int64 per voxel

  int alloc(int dev, std::int64_t bytes, int owner, bool transfer = false) {
    st_.push_back({dev, bytes, 1, owner, transfer});
    cur_[dev] += bytes;
    bump(dev);
    return static_cast<int>(st_.size()) - 1;
  }
  void ref(int s) { ++st_[s].refs; }
  void unref(int s) {
    if (--st_[s].refs == 0) cur_[st_[s].device] -= st_[s].bytes;
  }
  void bump(int dev) {
    auto& d = res_.devices[dev];
    if (cur_[dev] > d.peak) {
      d.peak = cur_[dev];
      d.peakStage = stage_;
      d.peakPhase = phase_;
    }
    if (phase_ == Phase::Backward && stage_ >= 0 && r_.stageDevice[stage_] == dev)
      res_.stages[stage_].backwardPeak = std::max(res_.stages[stage_].backwardPeak, cur_[dev]);
  }
  int newValue(int storage, std::int64_t channels, Dims dims, int dtype, bool requiresGrad = true) {
    vals_.push_back({storage, channels, dims, dtype, st_[storage].device, requiresGrad});
    pending_.push_back(-1);
    return static_cast<int>(vals_.size()) - 1;
  }
  int allocValue(int dev, std::int64_t channels, Dims dims, int dtype, int owner) {
    Value tmp{0, channels, dims, dtype, dev, true};
    return newValue(alloc(dev, bytesOf(tmp), owner), channels, dims, dtype);
  }
  void hold(int v) { ref(vals_[v].storage); }
  void drop(int v) { unref(vals_[v].storage); }

  // The step's phases (StepSimulator.cpp).
  void allocatePersistent();
  int placeBatch();  // returns the labels' storage beside the loss (-1 in inference)
  std::vector<int> stageInputs(int s);
  int copyInput(int s, int v, int dev);
  void forwardStage(int s);
  void releaseConsumedInputs(int s);
  int logitsForLoss();
  void runLoss(int logits);
  void runBackward();
  void runOptimizer();

  // Forward of a stage and its layers (StepLayers.cpp).
  int runStage(int s, const std::vector<int>& inputs, bool save, std::vector<Op>& ops);
  // Sharding: the input value `v` (output `name`) as stage s needs it — its slab, or the whole
  // tensor gathered. Returns v when nothing changes, else -(new value + 1), held once.
  int reshard(int s, const std::string& name, int v, int dev, std::vector<Op>& ops);
  void layer(int s, const LayerSpec& l, int& x, const std::vector<int>& inputs, bool save,
             std::vector<Op>& ops);
  void convLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save, std::vector<Op>& ops);
  void normLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save, std::vector<Op>& ops);
  void reluLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save);
  void poolLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save);
  void dropoutLayer(Op& op, int s, int& x, const Value& in, bool save);
  void concatLayer(Op& op, int s, int& x, const Value& in, const std::vector<int>& inputs);

  // Backward (StepBackward.cpp).
  void backward(Op& op);
  void backwardCheckpoint(Op& op, int g);
  void fetch(Op& op);
  void deliver(int value, int gradStorage);
  void beginStageBackward(int s);
  void endStageBackward(int s);

  const SimRequest& r_;
  const NetworkStructure& net_;
  const PlannerOptions& o_;
  std::vector<PlannerOptions> cpuOptions_;  // per device: o_ with its threads
  std::vector<Storage> st_;
  std::vector<Value> vals_;
  std::vector<int> pending_;  // per value: storage holding its gradient, or -1
  std::vector<std::int64_t> cur_;
  std::vector<char> gradsDone_;
  // Ranks (SimRequest::deviceRank): storages kept until the step ends; per stage, its output value,
  // the values its graph holds until its backward ends, and the outputs whose gradients other
  // ranks send it; the gradients held through the current stage's backward.
  std::vector<int> heldToEnd_;
  std::vector<int> stageOut_;
  std::vector<std::vector<int>> stageHeld_, remoteGrads_;
  std::vector<int> heldGrad_;
  std::vector<int> stageCache_;  // inference: autocast's weight casts, until the stage ends
  // The forward's bookkeeping: the recorded ops (backward replays them in reverse), the stage
  // outputs by name, each name's last reader, and (ranks) the copy of a value received on a device.
  std::vector<Op> ops_;
  std::map<std::string, int> outputs_;
  std::map<std::string, int> lastUse_;
  std::map<std::pair<int, int>, int> received_;
  SimResult res_;
  int stage_ = -1;
  Phase phase_ = Phase::Setup;
};

} // namespace splitseg::planner::detail::replay
