#include "core/planner/CpuConvScratch.h"
#include "core/planner/StepReplay.h"

namespace splitseg::planner::detail::replay {

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
    case LayerKind::ConvTranspose: convLayer(op, s, l, x, in, save, ops); break;
    case LayerKind::Norm: normLayer(op, s, l, x, in, save, ops); break;
    case LayerKind::ReLU: reluLayer(op, s, l, x, in, save); break;
    case LayerKind::MaxPool: poolLayer(op, s, l, x, in, save); break;
    case LayerKind::Dropout:
      if (r_.inference) return;  // eval: the identity
      dropoutLayer(op, s, x, in, save);
      break;
    case LayerKind::Concat: concatLayer(op, s, x, in, inputs); break;
  }
  ops.push_back(std::move(op));
}

void Simulator::convLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save,
                          std::vector<Op>& ops) {
  const int dev = r_.stageDevice[s];
  const bool cuda = r_.deviceIsCuda[dev];
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
}

void Simulator::normLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save,
                          std::vector<Op>& ops) {
  const int dev = r_.stageDevice[s];
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
}

void Simulator::reluLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save) {
  const int dev = r_.stageDevice[s];
  op.kind = OpKind::ReLU;
  int y;
  if (l.inplace) {  // same storage, new version; threshold_backward needs the result
    y = newValue(in.storage, in.channels, in.dims, in.dtype);
    vals_[y].cl = in.cl;
    ref(in.storage);
    // In place on a view (after instance norm): autograd's CopySlices backward makes a
    // base-sized copy of the gradient and a contiguous clone of the slice beside the ReLU's
    // own gradient (torch/csrc/autograd/functions/tensor.cpp, CopySlices::apply): two
    // tensors (tests/bench's instance-norm rows; docs/calibration.md, "Autograd terms").
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
}

void Simulator::poolLayer(Op& op, int s, const LayerSpec& l, int& x, const Value& in, bool save) {
  const int dev = r_.stageDevice[s];
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
}

void Simulator::dropoutLayer(Op& op, int s, int& x, const Value& in, bool save) {
  const int dev = r_.stageDevice[s];
  const bool cuda = r_.deviceIsCuda[dev];
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
}

void Simulator::concatLayer(Op& op, int s, int& x, const Value& in, const std::vector<int>& inputs) {
  const int dev = r_.stageDevice[s];
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

} // namespace splitseg::planner::detail::replay
