#include "core/placement/StepSimulator.h"
#include "core/base/Error.h"
#include "core/placement/CpuConvScratch.h"

#include <algorithm>
#include <map>

namespace splitseg::placement::detail {

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

namespace {

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
  // Kept until the step's sends complete, after the optimizer (dist::Comm::flush).
  void holdToEnd(int storage) { heldToEnd_.push_back(storage); }
  int actBytes(int stage) const { return bf16(stage) ? 2 : 4; }
  const PlannerOptions& cpuOptions(int dev) const { return cpuOptions_.at(static_cast<std::size_t>(dev)); }

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

  int runStage(int s, const std::vector<int>& inputs, bool save, std::vector<Op>& ops);
  // Sharding: the input value `v` (output `name`) as stage s needs it — its slab, or the whole
  // tensor gathered. Returns v when nothing changes, else -(new value + 1), held once.
  int reshard(int s, const std::string& name, int v, int dev, std::vector<Op>& ops);
  void layer(int s, const LayerSpec& l, int& x, const std::vector<int>& inputs, bool save,
             std::vector<Op>& ops);
  void backward(Op& op);
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
  SimResult res_;
  int stage_ = -1;
  Phase phase_ = Phase::Setup;
};

void Simulator::layer(int s, const LayerSpec& l, int& x, const std::vector<int>& inputs, bool save,
                      std::vector<Op>& ops) {
  const int dev = r_.stageDevice[s];
  const bool cuda = r_.deviceIsCuda[dev];
  if (l.kind == LayerKind::MaxPool && bf16(s) && !cuda && vals_[x].dtype == 2) {
    // CPU autocast runs max_pool3d in fp32: it pools (and saves) an fp32 copy of its input,
    // and the dropout after it runs in fp32 too, until the next convolution casts back.
    const Value b = vals_[x];
    const int f = allocValue(dev, b.channels, b.dims, 4, s);
    ops.push_back({OpKind::Cast, s, {x}, f, {}});
    drop(x);
    x = f;
  }
  const Value in = vals_[x];
  Op op{OpKind::Conv, s, {x}, -1, {}};
  switch (l.kind) {
    case LayerKind::Conv:
    case LayerKind::ConvTranspose: {
      int cin = x;
      if (bf16(s) && in.dtype == 4) {  // autocast casts the fp32 input; the conv keeps the copy
        cin = allocValue(dev, in.channels, in.dims, 2, s);
        ops.push_back({OpKind::Cast, s, {x}, cin, {}});
      }
      Dims d = in.dims;
      for (auto& n : d)
        n = l.kind == LayerKind::Conv ? (n + 2 * l.padding - l.kernel) / l.stride + 1
                                      : (n - 1) * l.stride - 2 * l.padding + l.kernel;
      // A sharded stage's convolution with a halo (core/shard/HaloConv3d) convolves its slab as
      // an unsharded layer does and adds the neighbours' halos' share through thin convolutions;
      // the halos (`padding` planes from each side) are saved for backward.
      const bool halo = l.kind == LayerKind::Conv && l.padding > 0 && sharded(s);
      if (halo) {
        Value hv = vals_[cin];
        hv.dims[r_.shardDim] = 2 * l.padding;
        const int halos = alloc(dev, bytesOf(hv), s);
        if (save) op.saved.push_back(halos);
        else unref(halos);
      }
      const std::int64_t macs = l.kernel * l.kernel * l.kernel * l.inChannels * l.outChannels *
                                voxels(l.kind == LayerKind::Conv ? d : in.dims) * r_.batch;
      res_.stages[s].flops += 2.0 * macs * (save ? 3 : 1);  // backward: grad input + grad weight
      const int weightCopy = bf16(s) ? alloc(dev, l.parameters * 2, s) : -1;
      const int y = allocValue(dev, l.outChannels, d, actBytes(s), s);
      op.inputs = {cin};
      op.output = y;
      op.weightGradBytes = l.parameters * 4;
      if (!cuda) {
        const bool grad = !r_.inference;
        const auto shape = [grad](const Value& v) { return ConvTensor{v.channels, v.dims, v.dtype, v.cl, grad && v.requiresGrad}; };
        // A slab runs the kernel its unsharded layer would, a micro-batch that of its batch
        // (HaloConv3d): LibTorch's size test sees the whole extent when the cut is along D or H.
        // A sharded 1x1x1 convolution (no halo) keeps LibTorch's choice.
        const std::int64_t shards = halo && r_.shardDim < 2 ? r_.stageShards.at(s) : 1;
        // Inference sends every such layer to oneDNN (shard::OneDnnInferenceScope).
        const std::int64_t whole = r_.inference ? std::int64_t{1} << 20
                                   : halo || !sharded(s) ? shards * std::max(1, r_.wholeBatch / r_.batch) : 1;
        const bool cl = !r_.channelsLast.empty() && r_.channelsLast[s];
        const ConvScratch c = cpuConvScratch(l, shape(vals_[cin]), shape(vals_[y]), r_.batch, cpuOptions(dev), whole, cl, r_.inference);
        if (c.forward > 0) unref(alloc(dev, c.forward, s));
        op.backwardScratch = c.backward;
        vals_[y].cl = c.outputChannelsLast;
      } else {  // PlannerOptions::cudaConv{Forward,Backward}Scratch say where these come from
        const auto inOut = static_cast<double>(bytesOf(vals_[cin]) + bytesOf(vals_[y]));
        const auto forward = static_cast<std::int64_t>(o_.cudaConvForwardScratch * inOut);
        if (forward > 0) unref(alloc(dev, forward, s));
        op.backwardScratch = static_cast<std::int64_t>(o_.cudaConvBackwardScratch * inOut);
      }
      if (save) {
        ref(vals_[cin].storage);
        op.saved.push_back(vals_[cin].storage);
        if (weightCopy >= 0) op.saved.push_back(weightCopy);
      } else if (weightCopy >= 0 && r_.inference) {
        // Autocast caches the cast of a weight (a leaf that requires grad) until the stage's
        // AutocastScope ends (engine/AutocastScope.h clears it).
        stageCache_.push_back(weightCopy);
      } else if (weightCopy >= 0) {
        unref(weightCopy);
      }
      if (cin != x) drop(cin);
      drop(x);
      x = y;
      break;
    }
    case LayerKind::Norm: {
      op.kind = OpKind::Norm;
      // A sharded stage's norm (core/shard/ShardNorm3d) is built of elementwise ops: its output
      // is no view, and it keeps the centred input in the input's place.
      const bool outputIsView = l.outputIsView && !sharded(s);
      // Instance norm reshapes a channels-last input through a plain copy, which it keeps for
      // backward in the input's place; its output is plain (traced as CpuConvScratch.cpp says).
      const int plainCopy = in.cl && outputIsView ? alloc(dev, bytesOf(in), s) : -1;
      // Its input gradient comes back plain: the channels-last convolution that produced the
      // input reorders it to channels-last in its backward.
      if (plainCopy >= 0)
        for (auto it = ops.rbegin(); it != ops.rend(); ++it)
          if (it->output == x) {
            if (it->kind == OpKind::Conv) it->backwardScratch += bytesOf(in);
            break;
          }
      const int y = allocValue(dev, in.channels, in.dims, in.dtype, s);
      vals_[y].view = outputIsView;
      vals_[y].cl = in.cl && plainCopy < 0;
      op.output = y;
      if (save) {
        const int kept = plainCopy >= 0 ? plainCopy : in.storage;
        if (plainCopy < 0) ref(in.storage);
        op.saved.push_back(kept);
      } else if (plainCopy >= 0) {
        unref(plainCopy);
      }
      drop(x);
      x = y;
      break;
    }
    case LayerKind::ReLU: {
      op.kind = OpKind::ReLU;
      int y;
      if (l.inplace) {  // same storage, new version; threshold_backward needs the result
        y = newValue(in.storage, in.channels, in.dims, in.dtype);
        vals_[y].cl = in.cl;
        ref(in.storage);
        // In place on a view (after instance norm): autograd's CopySlices backward makes a
        // base-sized copy of the gradient and a contiguous clone of the slice beside the ReLU's
        // own gradient (torch/csrc/autograd/functions/tensor.cpp, CopySlices::apply). Two
        // tensors: with them the seed network's instance-norm step at 64^3 and an unseen
        // 48^3 x 2 one are predicted exactly by the allocation hook (tests/bench, issue 17).
        if (in.view) {
          op.backwardScratch = 2 * bytesOf(in);
          op.inplaceOnView = true;
        }
      } else {
        y = allocValue(dev, in.channels, in.dims, in.dtype, s);
        vals_[y].cl = in.cl;
      }
      op.output = y;
      if (save) {
        ref(vals_[y].storage);
        op.saved.push_back(vals_[y].storage);
      }
      drop(x);
      x = y;
      break;
    }
    case LayerKind::MaxPool: {
      op.kind = OpKind::Pool;
      Dims d = in.dims;
      for (auto& n : d) n = (n - l.kernel) / l.stride + 1;
      const int y = allocValue(dev, in.channels, d, in.dtype, s);
      vals_[y].cl = in.cl;
      const int indices = alloc(dev, bytesOf(vals_[y]) / in.dtype * 8, s);  // int64 argmax
      op.output = y;
      if (save) {
        ref(in.storage);
        op.saved = {in.storage, indices};
      } else {
        unref(indices);
      }
      drop(x);
      x = y;
      break;
    }
    case LayerKind::Dropout: {
      if (r_.inference) return;  // eval: the identity
      op.kind = OpKind::Dropout;
      // CUDA runs the fused kernel and keeps a bool mask; CPU multiplies by a scaled noise
      // tensor of the input's dtype and keeps that.
      const std::int64_t elems = bytesOf(in) / in.dtype;
      const int mask = alloc(dev, cuda ? elems : elems * in.dtype, s);
      const int y = allocValue(dev, in.channels, in.dims, in.dtype, s);
      vals_[y].cl = in.cl;
      op.output = y;
      if (save) op.saved = {mask};
      else unref(mask);
      drop(x);
      x = y;
      break;
    }
    case LayerKind::Concat: {
      op.kind = OpKind::Concat;
      std::int64_t channels = in.channels;
      for (std::size_t i = 1; i < inputs.size(); ++i) {
        channels += vals_[inputs[i]].channels;
        op.inputs.push_back(inputs[i]);
      }
      int dtype = in.dtype;  // autocast promotes to the widest input
      for (int v : op.inputs) dtype = std::max(dtype, vals_[v].dtype);
      const int y = allocValue(dev, channels, in.dims, dtype, s);
      bool cl = in.cl;  // torch.cat keeps a layout all its inputs share, else gives a plain one
      for (int v : op.inputs) cl = cl && vals_[v].cl;
      vals_[y].cl = cl;
      op.output = y;
      drop(x);
      x = y;
      break;
    }
  }
  ops.push_back(std::move(op));
}

int Simulator::runStage(int s, const std::vector<int>& inputs, bool save, std::vector<Op>& ops) {
  int x = inputs.at(0);
  hold(x);
  // Inference: the stage's forward keeps the tensor it hands its convolution block (the pooled
  // input, or the concatenation of the up-sampled input and the skip) until the block returns
  // (model/UNet3d.cpp's UNetStageImpl::forward); in training the block's first convolution saves it anyway.
  int blockInput = -1;
  for (const auto& l : net_.stages[s].layers) {
    if (r_.inference && blockInput < 0 && l.kind == LayerKind::Conv) {
      blockInput = x;
      hold(x);
    }
    layer(s, l, x, inputs, save, ops);
  }
  if (blockInput >= 0) drop(blockInput);
  for (int c : stageCache_) unref(c);
  stageCache_.clear();
  return x;  // held by the caller
}

int Simulator::reshard(int s, const std::string& name, int v, int dev, std::vector<Op>& ops) {
  const int axis = r_.shardDim, other = (axis + 1) % 3;
  const Value src = vals_[v];
  const std::int64_t factor = std::max<std::int64_t>(1, r_.size[other] / std::max<std::int64_t>(1, src.dims[other]));
  const int producer = name == "input" ? -1 : net_.indexOf(name);
  const bool sameGroup = producer >= 0 && r_.stageGroup[s] >= 0 && r_.stageGroup[producer] == r_.stageGroup[s];
  if (sameGroup) return v;  // slabs pass straight on
  const std::int64_t want = (r_.stageSlab[s] > 0 ? r_.stageSlab[s] : r_.size[axis]) / factor;
  if (src.dims[axis] == want) return v;
  Dims d = src.dims;
  d[axis] = want;
  if (want < src.dims[axis] && src.device == dev) {
    // Scatter on the same device: the executor's slab is a view of the whole tensor.
    hold(v);
    const int view = newValue(src.storage, src.channels, d, src.dtype, src.requiresGrad);
    ops.push_back({OpKind::Copy, s, {v}, view, {}});  // backward: a whole-sized gradient for the source
    return -view - 1;
  }
  // A slab moved to another device, or the slabs gathered into a whole tensor here.
  Value tmp = src;
  tmp.dims = d;
  const int c = newValue(alloc(dev, bytesOf(tmp), s, true), src.channels, d, src.dtype, src.requiresGrad);
  res_.stages[s].transferBytes += bytesOf(tmp);
  res_.bytesMoved += bytesOf(tmp);
  ops.push_back({OpKind::Copy, s, {v}, c, {}});
  return -c - 1;
}

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
    case OpKind::Checkpoint: {
      // Recompute the stage with grad enabled, then backward through the recomputed graph.
      std::vector<Op> local;
      if (op.offloaded) fetch(op);
      const int y = runStage(op.stage, op.offloaded ? op.fetched : op.inputs, true, local);
      // The incoming gradient is an argument of the checkpoint's backward: it stays alive until
      // the whole recomputed stage has run backward, not only until the stage's last layer. On
      // ranks (each stage's backward its own call) the measured peaks show no such hold:
      // RankMemoryTest's recompute rows at M=1 and 2 were 4-13% over with it, within 2.2% without.
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
      break;
    }
    default: {
      if (op.weightGradBytes > 0 && !o_.gradientsPersist) {
        alloc(dev, op.weightGradBytes, op.stage);  // lives until the optimizer zeroes it
      }
      std::int64_t scratchBytes = op.backwardScratch;
      // In place on a view, the gradient first goes through the view's AsStridedBackward, which
      // makes a base-sized copy and lets the incoming gradient go. Where something else still
      // holds that gradient (a rank's trainer or a checkpoint's backward, for a stage's last
      // ReLU) the copy comes on top (RankMemoryTest, instance norm with enc0 recomputed: 46.55
      // MiB measured against 42.55 planned at M=1, one map of enc0's output, before this).
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
  // layer that reads it. With that, RankMemoryTest's rows are within 1.1%, rank 0's exact
  // (2026-12-04, AVX2). It had looked unneeded while the AVX2 convolutions were modelled with
  // AVX-512's larger transients, which hid it.
  const int out = stageOut_[s];
  if (out >= 0 && pending_[out] >= 0) {
    ref(pending_[out]);
    heldGrad_.push_back(pending_[out]);
  }
  // The trainer enters a stage's graph by its output's edge and lets the output go first (the
  // head's logits stay: its backward starts from the loss). From then on the output's storage
  // lives only as long as the graph saves it: a checkpointed stage's output, computed without a
  // graph, is freed. Without this the decoders' rank held one more output map through dec0's
  // backward (RankMemoryTest, 2026-12-04: 52.3 -> 48.3 MiB at M=1 with every stage recomputed).
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

SimResult Simulator::run() {
  const auto& stages = net_.stages;
  const int ns = static_cast<int>(stages.size());
  // Parameters and Adam moments are allocated before the step and outlive it.
  for (int s = 0; s < ns; ++s) {
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
  phase_ = Phase::Forward;
  std::map<std::string, int> outputs;
  std::vector<Op> ops;
  int inputDev = -1, inputStage = -1;
  for (int s = 0; s < ns; ++s)
    for (const auto& n : stages[s].inputs)
      if (n == "input" && inputDev < 0) {
        inputDev = r_.stageDevice[s];
        inputStage = s;
      }
  if (inputDev < 0) throw InvalidArgument("planner: no stage reads the network input");
  std::map<std::string, int> lastUse;
  for (int s = 0; s < ns; ++s)
    for (const auto& n : stages[s].inputs) lastUse[n] = s;
  const int head = ns - 1;
  const int headDev = r_.stageDevice[head];
  const std::int64_t labelBytes = r_.batch * voxels(r_.size) * 8;  // int64 per voxel
  {  // the batch: fp32 input on its first device, int64 labels beside the loss
    Value tmp{0, net_.inChannels, r_.size, 4, inputDev, false};
    const int in = newValue(alloc(inputDev, bytesOf(tmp), inputStage), net_.inChannels, r_.size, 4, false);
    outputs["input"] = in;
    if (r_.inference) hold(in);  // the caller's tensor, alive through the pass
    if (ranks()) {  // rank 0 keeps each micro-batch's input and labels for the step
      hold(in);
      holdToEnd(vals_[in].storage);
      if (crossesRanks(inputDev, headDev)) holdToEnd(alloc(inputDev, labelBytes, inputStage));
    }
  }
  const int target = r_.inference ? -1 : alloc(headDev, labelBytes, head);
  if (ranks() && !r_.inference) {  // the head's rank keeps the labels for the step's Dice
    ref(target);
    holdToEnd(target);
  }
  std::map<std::pair<int, int>, int> received;  // ranks: (value, device) -> the copy received there

  for (int s = 0; s < ns; ++s) {
    stage_ = s;
    const int dev = r_.stageDevice[s];
    std::vector<int> local;
    for (const auto& name : stages[s].inputs) {
      int v = outputs.at(name);
      if (!r_.stageSlab.empty()) v = reshard(s, name, v, dev, ops);
      if (v < 0) {  // resharded into a new tensor on this device (held once)
        local.push_back(-v - 1);
      } else if (received.count({v, dev})) {  // one receive per rank for all its readers
        hold(received.at({v, dev}));
        local.push_back(received.at({v, dev}));
      } else if (vals_[v].device != dev) {  // the executor copies the input to the stage's device
        const Value src = vals_[v];
        const bool sent = crossesRanks(src.device, dev) ||
                          (!r_.inferenceRank.empty() && r_.inferenceRank.at(src.device) != r_.inferenceRank.at(dev));
        if (sent && !ranks()) {
          // Inference: the send holds what it sends until the pass's flush, a channels-last
          // output's plain copy or a plain output itself (a pipeline's rank 0 with two threads
          // peaks in its head beside the skips it sent: 12% over without them, 2026-12-05).
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
        const int c = newValue(alloc(dev, bytesOf(src), s, true), src.channels, src.dims, src.dtype,
                               src.requiresGrad);
        res_.stages[s].transferBytes += bytesOf(src);
        res_.bytesMoved += bytesOf(src);
        ops.push_back({OpKind::Copy, s, {v}, c, {}});
        local.push_back(c);
        if (sent) {
          received[{v, dev}] = c;
          if (!ranks()) hold(c);  // inference: held for the rank's later readers
        }
      } else {
        hold(v);
        local.push_back(v);
      }
      const int last = local.back();
      if (!bf16(s) && vals_[last].dtype == 2) {
        // An fp32 stage after a bf16 one: the executor casts the input up before the stage.
        const Value b = vals_[last];
        const int f = newValue(alloc(dev, bytesOf(b) * 2, s), b.channels, b.dims, 4, b.requiresGrad);
        ops.push_back({OpKind::Cast, s, {last}, f, {}});
        drop(last);
        local.back() = f;
      }
    }
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
      ops.push_back(std::move(op));
    } else {
      y = runStage(s, local, !r_.inference, ops);  // inference saves nothing
    }
    if (ranks()) stageHeld_[s] = local;  // the stage's leaves, until its backward ends
    else for (int v : local) drop(v);
    if ((r_.offload && !ranks()) || r_.inference) {
      // The executor lets go of a stage's output after its last consumer ran; with offloaded
      // checkpoints nothing else may hold it on the device.
      for (const auto& name : stages[s].inputs)
        if (lastUse.at(name) == s && outputs.count(name)) {
          for (auto it = received.begin(); it != received.end();) {  // inference over ranks: its copies too
            if (it->first.first != outputs.at(name)) {
              ++it;
              continue;
            }
            drop(it->second);
            it = received.erase(it);
          }
          drop(outputs.at(name));
          outputs.erase(name);
        }
    }
    res_.stages[s].outputBytes = bytesOf(vals_[y]);
    outputs[stages[s].name] = y;
    stageOut_[s] = y;
  }
  int logits = outputs.at(stages[head].name);
  if (vals_[logits].dtype != 4) {  // the executor hands the loss fp32 logits
    const Value l = vals_[logits];
    const int f = allocValue(headDev, l.channels, l.dims, 4, head);
    ops.push_back({OpKind::Cast, head, {logits}, f, {}});
    logits = f;
  } else {
    hold(logits);
  }
  for (auto& [name, v] : outputs) {
    if (ranks() && name != "input") stageHeld_[net_.indexOf(name)].push_back(v);  // until its backward ends
    else drop(v);  // the executor's map of stage outputs goes away
  }
  if (r_.inference) {  // the logits go back to the caller
    for (int d = 0; d < static_cast<int>(cur_.size()); ++d) res_.devices[d].endOfForward = cur_[d];
    return std::move(res_);
  }

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
  if (ranks()) holdToEnd(alloc(headDev, labelBytes, head));  // the predicted labels, for Dice
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

  phase_ = Phase::Backward;
  stage_ = -1;  // so the head's backward registers its start below
  std::vector<std::int64_t> atStart(ns, 0);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
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
      for (auto next = it + 1; next != ops.rend(); ++next)
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
  drop(logits);
  unref(target);

  phase_ = Phase::Optimizer;
  stage_ = -1;
  // Adam's step makes two temporaries the size of the parameter it updates.
  std::vector<std::int64_t> largest(cur_.size(), 0);
  for (int s = 0; s < ns; ++s)
    for (const auto& l : stages[s].layers)
      largest[r_.stageDevice[s]] = std::max(largest[r_.stageDevice[s]], l.largestParameter * 4 * 2);
  for (int d = 0; d < static_cast<int>(cur_.size()); ++d)
    if (r_.adam && largest[d] > 0) unref(alloc(d, largest[d], -1));
  for (int t : heldToEnd_) unref(t);
  return std::move(res_);
}

} // namespace

SimResult simulateStep(const SimRequest& request) {
  Simulator sim(request);
  return sim.run();
}

} // namespace splitseg::placement::detail
