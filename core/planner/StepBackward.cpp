#include "core/planner/StepReplay.h"

namespace splitseg::planner::detail::replay {

void Simulator::deliver(int v, int g) {
  if (!vals_[v].requiresGrad) {
    unref(g);
    return;
  }
  if (pending_[v] < 0) {
    pending_[v] = g;
    return;
  }
  // The engine accumulates in place when the earlier buffer is its only user (true for the
  // skip gradients, whose other half was consumed by then), so the new one is just freed.
  unref(g);
}

void Simulator::fetch(Op& op) {
  if (!op.fetched.empty()) return;
  for (int v : op.inputs) {
    const Value src = vals_[v];
    op.fetched.push_back(newValue(alloc(src.device, bytesOf(src), op.stage, true), src.channels, src.dims,
                                  src.dtype, src.requiresGrad));
  }
}

void Simulator::backward(Op& op) {
  const int g = pending_[op.output];
  pending_[op.output] = -1;
  if (g < 0) {  // output never reached the loss
    for (int s : op.saved) unref(s);
    return;
  }
  const int dev = vals_[op.output].device;
  switch (op.kind) {
    case OpKind::Concat:
      // Input gradients are views of the output gradient: its storage lives until all are used.
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const int v = op.inputs[i];
        if (ranks() && i > 0 && r_.batch > 1 && vals_[v].requiresGrad) {
          // A stage input is a leaf on ranks: autograd's AccumulateGrad copies a view that is not
          // laid out like the leaf (a channel slice of a batch > 1) into a gradient of its own.
          deliver(v, alloc(vals_[v].device, bytesOf(vals_[v]), op.stage));
          continue;
        }
        ref(g);
        deliver(v, g);
      }
      unref(g);
      break;
    case OpKind::Copy: {
      const Value src = vals_[op.inputs[0]];
      res_.bytesMoved += bytesOf(src);
      if (crossesRanks(src.device, dev)) {
        // Sent to the producer's rank, which receives it when that stage's backward begins; the
        // send keeps this rank's gradient (at batch 1, the whole storage it is a view of).
        holdToEnd(g);
        const auto producer = std::find(stageOut_.begin(), stageOut_.end(), op.inputs[0]);
        if (producer != stageOut_.end()) remoteGrads_[producer - stageOut_.begin()].push_back(op.inputs[0]);
        break;
      }
      const int gs = alloc(src.device, bytesOf(src), -1);
      unref(g);
      deliver(op.inputs[0], gs);
      break;
    }
    case OpKind::Checkpoint:
      backwardCheckpoint(op, g);
      break;
    default: {
      if (op.weightGradBytes > 0 && !o_.gradientsPersist) {
        alloc(dev, op.weightGradBytes, op.stage);  // lives until the optimizer zeroes it
      }
      std::int64_t scratchBytes = op.backwardScratch;
      // In place on a view, the gradient first goes through the view's AsStridedBackward, which
      // makes a base-sized copy and lets the incoming gradient go. Where something else still
      // holds that gradient (a rank's trainer or a checkpoint's backward, for a stage's last
      // ReLU) the copy comes on top (RankMemoryTest: instance norm with enc0 recomputed).
      if (op.inplaceOnView && st_[g].refs > 1) scratchBytes += bytesOf(vals_[op.output]);
      const int scratch = scratchBytes > 0 ? alloc(dev, scratchBytes, op.stage) : -1;
      const int in = op.inputs[0];
      const int gi = vals_[in].requiresGrad ? alloc(vals_[in].device, bytesOf(vals_[in]), op.stage) : -1;
      if (scratch >= 0) unref(scratch);
      unref(g);
      if (gi >= 0) deliver(in, gi);
      break;
    }
  }
  for (int s : op.saved) unref(s);
}

// Recompute the stage with grad enabled, then backward through the recomputed graph.
void Simulator::backwardCheckpoint(Op& op, int g) {
  std::vector<Op> local;
  if (op.offloaded) fetch(op);
  const int y = runStage(op.stage, op.offloaded ? op.fetched : op.inputs, true, local);
  // The incoming gradient is an argument of the checkpoint's backward: it stays alive until
  // the whole recomputed stage has run backward, not only until the stage's last layer. On
  // ranks (each stage's backward its own call) the measured peaks show no such hold
  // (RankMemoryTest's recompute rows; docs/calibration.md, "Ranks").
  const bool held = !ranks();
  if (held) ref(g);
  pending_[y] = g;
  // The engine enters the recomputed graph by its edges and lets go of the outputs first:
  // they live on only where the graph saved them.
  drop(y);
  for (auto it = local.rbegin(); it != local.rend(); ++it) backward(*it);
  if (held) unref(g);
  for (std::size_t i = 0; i < op.fetched.size(); ++i) {
    // Gradients of the fetched copies are those of the stage's inputs.
    const int f = op.fetched[i];
    if (pending_[f] >= 0) deliver(op.inputs[i], pending_[f]);
    pending_[f] = -1;
    drop(f);
  }
  op.fetched.clear();
}

void Simulator::beginStageBackward(int s) {
  if (!ranks()) return;
  for (int v : remoteGrads_[s]) {
    const int g = alloc(vals_[v].device, bytesOf(vals_[v]), s);
    if (pending_[v] < 0) {
      pending_[v] = g;
      continue;
    }
    // A local reader's gradient is there already: the trainer keeps it and passes their sum on,
    // a tensor of its own until the stage is done.
    heldGrad_.push_back(g);
  }
  remoteGrads_[s].clear();
  // The output gradient is an argument of the trainer's autograd::backward call (and stays in
  // its per-micro-batch table): alive until the stage's backward ends, not freed by the last
  // layer that reads it (RankMemoryTest's rows; docs/calibration.md, "Ranks").
  const int out = stageOut_[s];
  if (out >= 0 && pending_[out] >= 0) {
    ref(pending_[out]);
    heldGrad_.push_back(pending_[out]);
  }
  // The trainer enters a stage's graph by its output's edge and lets the output go first (the
  // head's logits stay: its backward starts from the loss). From then on the output's storage
  // lives only as long as the graph saves it: a checkpointed stage's output, computed without a
  // graph, is freed: else the decoders' rank holds one more output map through dec0's backward
  // (RankMemoryTest, every stage recomputed).
  auto& held = stageHeld_[s];
  const auto it = std::find(held.begin(), held.end(), out);
  if (s != static_cast<int>(net_.stages.size()) - 1 && it != held.end()) {
    held.erase(it);
    drop(out);
  }
}

void Simulator::endStageBackward(int s) {
  if (!ranks()) return;
  for (int g : heldGrad_) unref(g);
  heldGrad_.clear();
  for (int v : stageHeld_[s]) drop(v);
  stageHeld_[s].clear();
}

} // namespace splitseg::planner::detail::replay
