#include "core/planner/StepSimulator.h"
#include "core/base/Error.h"
#include "core/planner/StepReplay.h"

namespace splitseg::planner::detail {

const char* toString(Phase p) {
  switch (p) {
    case Phase::Setup: return "setup";
    case Phase::Forward: return "forward";
    case Phase::Loss: return "loss";
    case Phase::Backward: return "backward";
    case Phase::Optimizer: return "optimizer";
  }
  return "?";
}

namespace replay {

// Parameters and Adam moments are allocated before the step and outlive it.
void Simulator::allocatePersistent() {
  const auto& stages = net_.stages;
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    stage_ = s;
    const int dev = r_.stageDevice[s];
    const std::int64_t p = stages[s].parameters;
    res_.stages[s].parameters = p;
    const std::int64_t persistent =
        r_.inference ? p * 4 : p * 4 * (1 + (r_.adam ? 2 : 0) + (o_.gradientsPersist ? 1 : 0));
    if (persistent > 0) alloc(dev, persistent, s);
    res_.devices[dev].persistent += persistent;
  }
  stage_ = -1;
}

// The batch: fp32 input on its first device, int64 labels beside the loss.
int Simulator::placeBatch() {
  const auto& stages = net_.stages;
  const int ns = static_cast<int>(stages.size());
  int inputDev = -1, inputStage = -1;
  for (int s = 0; s < ns; ++s)
    for (const auto& n : stages[s].inputs)
      if (n == "input" && inputDev < 0) {
        inputDev = r_.stageDevice[s];
        inputStage = s;
      }
  if (inputDev < 0) throw InvalidArgument("planner: no stage reads the network input");
  for (int s = 0; s < ns; ++s)
    for (const auto& n : stages[s].inputs) lastUse_[n] = s;
  const int head = ns - 1;
  const int headDev = r_.stageDevice[head];
  {
    Value tmp{0, net_.inChannels, r_.size, 4, inputDev, false};
    const int in = newValue(alloc(inputDev, bytesOf(tmp), inputStage), net_.inChannels, r_.size, 4, false);
    outputs_["input"] = in;
    if (r_.inference) hold(in);  // the caller's tensor, alive through the pass
    if (ranks()) {  // rank 0 keeps each micro-batch's input and labels for the step
      hold(in);
      holdToEnd(vals_[in].storage);
      if (crossesRanks(inputDev, headDev)) holdToEnd(alloc(inputDev, labelBytes(), inputStage));
    }
  }
  const int target = r_.inference ? -1 : alloc(headDev, labelBytes(), head);
  if (ranks() && !r_.inference) {  // the head's rank keeps the labels for the step's Dice
    ref(target);
    holdToEnd(target);
  }
  return target;
}

// Input `v` of stage s copied from another device (the executor's copy, or a send between ranks).
int Simulator::copyInput(int s, int v, int dev) {
  const Value src = vals_[v];
  const bool sent = crossesRanks(src.device, dev) ||
                    (!r_.inferenceRank.empty() && r_.inferenceRank.at(src.device) != r_.inferenceRank.at(dev));
  if (sent && !ranks()) {
    // Inference: the send holds what it sends until the pass's flush, a channels-last output's
    // plain copy or a plain output itself (a pipeline's rank 0 peaks in its head beside the skips
    // it sent).
    if (src.cl) {
      alloc(src.device, bytesOf(src), s);
    } else {
      ref(src.storage);
      holdToEnd(src.storage);
    }
  }
  if (sent && ranks()) {  // the sender keeps it until the step ends
    ref(src.storage);
    holdToEnd(src.storage);
  }
  const int c = newValue(alloc(dev, bytesOf(src), s, true), src.channels, src.dims, src.dtype, src.requiresGrad);
  res_.stages[s].transferBytes += bytesOf(src);
  res_.bytesMoved += bytesOf(src);
  ops_.push_back({OpKind::Copy, s, {v}, c, {}});
  if (sent) {
    received_[{v, dev}] = c;
    if (!ranks()) hold(c);  // inference: held for the rank's later readers
  }
  return c;
}

// Stage s's inputs on its device, each held once: resharded, received, copied or as they are.
std::vector<int> Simulator::stageInputs(int s) {
  const int dev = r_.stageDevice[s];
  std::vector<int> local;
  for (const auto& name : net_.stages[s].inputs) {
    int v = outputs_.at(name);
    if (!r_.stageSlab.empty()) v = reshard(s, name, v, dev, ops_);
    if (v < 0) {  // resharded into a new tensor on this device (held once)
      local.push_back(-v - 1);
    } else if (received_.count({v, dev})) {  // one receive per rank for all its readers
      hold(received_.at({v, dev}));
      local.push_back(received_.at({v, dev}));
    } else if (vals_[v].device != dev) {  // the executor copies the input to the stage's device
      local.push_back(copyInput(s, v, dev));
    } else {
      hold(v);
      local.push_back(v);
    }
    const int last = local.back();
    if (!bf16(s) && vals_[last].dtype == 2) {
      // An fp32 stage after a bf16 one: the executor casts the input up before the stage.
      const Value b = vals_[last];
      const int f = newValue(alloc(dev, bytesOf(b) * 2, s), b.channels, b.dims, 4, b.requiresGrad);
      ops_.push_back({OpKind::Cast, s, {last}, f, {}});
      drop(last);
      local.back() = f;
    }
  }
  return local;
}

void Simulator::forwardStage(int s) {
  stage_ = s;
  const int dev = r_.stageDevice[s];
  const std::vector<int> local = stageInputs(s);
  int y;
  if (r_.checkpointed[s]) {
    std::vector<Op> discarded;
    y = runStage(s, local, false, discarded);
    Op op{OpKind::Checkpoint, s, local, y, {}};
    op.offloaded = r_.offload && r_.deviceIsCuda[dev];
    for (int v : local) {
      if (op.offloaded) {
        res_.stages[s].offloadBytes += bytesOf(vals_[v]);
        continue;
      }
      ref(vals_[v].storage);
      op.saved.push_back(vals_[v].storage);
    }
    ops_.push_back(std::move(op));
  } else {
    y = runStage(s, local, !r_.inference, ops_);  // inference saves nothing
  }
  if (ranks()) stageHeld_[s] = local;  // the stage's leaves, until its backward ends
  else for (int v : local) drop(v);
  if ((r_.offload && !ranks()) || r_.inference) releaseConsumedInputs(s);
  res_.stages[s].outputBytes = bytesOf(vals_[y]);
  outputs_[net_.stages[s].name] = y;
  stageOut_[s] = y;
}

// The executor lets go of a stage's output after its last consumer ran; with offloaded
// checkpoints nothing else may hold it on the device.
void Simulator::releaseConsumedInputs(int s) {
  for (const auto& name : net_.stages[s].inputs)
    if (lastUse_.at(name) == s && outputs_.count(name)) {
      for (auto it = received_.begin(); it != received_.end();) {  // inference over ranks: its copies too
        if (it->first.first != outputs_.at(name)) {
          ++it;
          continue;
        }
        drop(it->second);
        it = received_.erase(it);
      }
      drop(outputs_.at(name));
      outputs_.erase(name);
    }
}

// The head's output as the loss takes it (fp32, held), and the executor's map of outputs let go.
int Simulator::logitsForLoss() {
  const int head = static_cast<int>(net_.stages.size()) - 1;
  const int headDev = r_.stageDevice[head];
  int logits = outputs_.at(net_.stages[head].name);
  if (vals_[logits].dtype != 4) {  // the executor hands the loss fp32 logits
    const Value l = vals_[logits];
    const int f = allocValue(headDev, l.channels, l.dims, 4, head);
    ops_.push_back({OpKind::Cast, head, {logits}, f, {}});
    logits = f;
  } else {
    hold(logits);
  }
  for (auto& [name, v] : outputs_) {
    if (ranks() && name != "input") stageHeld_[net_.indexOf(name)].push_back(v);  // until its backward ends
    else drop(v);  // the executor's map of stage outputs goes away
  }
  return logits;
}

void Simulator::runLoss(int logits) {
  const auto& stages = net_.stages;
  const int ns = static_cast<int>(stages.size());
  const int head = ns - 1;
  const int headDev = r_.stageDevice[head];
  phase_ = Phase::Loss;
  stage_ = head;
  const std::int64_t logitBytes = bytesOf(vals_[logits]);
  std::vector<int> lossSaved;
  for (int i = 0; i < o_.lossSavedTensors; ++i) lossSaved.push_back(alloc(headDev, logitBytes, head));
  {
    std::vector<int> scratch;
    for (int i = 0; i < o_.lossForwardTensors; ++i) scratch.push_back(alloc(headDev, logitBytes, head));
    for (int t : scratch) unref(t);
  }
  if (ranks()) holdToEnd(alloc(headDev, labelBytes(), head));  // the predicted labels, for Dice
  for (int d = 0; d < static_cast<int>(cur_.size()); ++d) res_.devices[d].endOfForward = cur_[d];
  for (const auto& t : st_) {
    if (t.refs <= 0 || t.owner < 0) continue;
    if (t.transfer) continue;
    res_.stages[t.owner].activationBytes += t.bytes;
  }
  for (int s = 0; s < ns; ++s)  // persistent memory is not an activation
    res_.stages[s].activationBytes -= stages[s].parameters * 4 * (1 + (r_.adam ? 2 : 0) +
                                                                   (o_.gradientsPersist ? 1 : 0));
  // Loss backward: gradient of the logits plus the loss's own temporaries.
  const int gl = alloc(headDev, logitBytes, head);
  std::vector<int> tmp;
  for (int i = 0; i < o_.lossBackwardTensors; ++i) tmp.push_back(alloc(headDev, logitBytes, head));
  for (int t : tmp) unref(t);
  for (int t : lossSaved) unref(t);
  deliver(logits, gl);
}

// The recorded ops in reverse, stage by stage.
void Simulator::runBackward() {
  const int ns = static_cast<int>(net_.stages.size());
  phase_ = Phase::Backward;
  stage_ = -1;  // so the head's backward registers its start below
  std::vector<std::int64_t> atStart(ns, 0);
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
    if (it->stage != stage_) {
      if (stage_ >= 0) endStageBackward(stage_);
      stage_ = it->stage;
      beginStageBackward(stage_);
      const int dev = r_.stageDevice[stage_];
      if (res_.stages[stage_].backwardPeak == 0) {
        atStart[stage_] = cur_[dev];
        res_.stages[stage_].backwardPeak = cur_[dev];
      }
    }
    if (it->kind == OpKind::Checkpoint && it->offloaded) {
      // Its own inputs come back first; the next offloaded stage's are prefetched during its backward.
      fetch(*it);
      for (auto next = it + 1; next != ops_.rend(); ++next)
        if (next->kind == OpKind::Checkpoint && next->offloaded) {
          fetch(*next);
          break;
        }
    }
    backward(*it);
  }
  if (stage_ >= 0) endStageBackward(stage_);
  for (int s = 0; s < ns; ++s)
    res_.stages[s].backwardTransient = res_.stages[s].backwardPeak - atStart[s];
}

// Adam's step makes two temporaries the size of the parameter it updates.
void Simulator::runOptimizer() {
  phase_ = Phase::Optimizer;
  stage_ = -1;
  std::vector<std::int64_t> largest(cur_.size(), 0);
  for (int s = 0; s < static_cast<int>(net_.stages.size()); ++s)
    for (const auto& l : net_.stages[s].layers)
      largest[r_.stageDevice[s]] = std::max(largest[r_.stageDevice[s]], l.largestParameter * 4 * 2);
  for (int d = 0; d < static_cast<int>(cur_.size()); ++d)
    if (r_.adam && largest[d] > 0) unref(alloc(d, largest[d], -1));
  for (int t : heldToEnd_) unref(t);
}

SimResult Simulator::run() {
  allocatePersistent();
  phase_ = Phase::Forward;
  const int target = placeBatch();
  for (int s = 0; s < static_cast<int>(net_.stages.size()); ++s) forwardStage(s);
  const int logits = logitsForLoss();
  if (r_.inference) {  // the logits go back to the caller
    for (int d = 0; d < static_cast<int>(cur_.size()); ++d) res_.devices[d].endOfForward = cur_[d];
    return std::move(res_);
  }
  runLoss(logits);
  runBackward();
  drop(logits);
  unref(target);
  runOptimizer();
  return std::move(res_);
}

} // namespace replay

SimResult simulateStep(const SimRequest& request) {
  replay::Simulator sim(request);
  return sim.run();
}

} // namespace splitseg::planner::detail
