#include "core/engine/SplitExecutor.h"
#include "core/base/Error.h"
#include "core/engine/AutocastScope.h"
#include "core/engine/Devices.h"
#include "core/engine/ShardedStage.h"
#include "core/engine/Recompute.h"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/torch.h>

namespace splitseg::engine {

// Hook times of one forward's backward, per stage (written from autograd's threads).
struct SplitExecutor::BackwardMarks {
  std::mutex mutex;
  std::vector<double> start, end;  // -1: not reached
};

SplitExecutor::SplitExecutor(std::shared_ptr<model::StagedNetwork> network, placement::Placement placement,
                             placement::StagePrecisions precision, std::set<std::string> recompute)
    : network_(std::move(network)), precision_(std::move(precision)), recompute_(std::move(recompute)),
      specs_(network_->stageSpecs()) {
  setPlacement(placement);
}

void SplitExecutor::setPlacement(const placement::Placement& p) {
  const auto names = network_->stageNames();
  if (p.stages() != names) throw InvalidArgument("placement does not list the network's stages in order");
  std::vector<std::string> available{"cpu"};
  for (std::size_t i = 0; i < torch::cuda::device_count(); ++i) available.push_back("cuda:" + std::to_string(i));
  for (const auto& [name, standIn] : deviceStandIns()) available.push_back(name);
  p.checkDevices(available);
  if (p.anySharded() && !network_->supportsSharding())
    throw InvalidArgument("the " + network_->architecture() +
                          " architecture does not support sharded stages (its layers take no halo); place each stage on one device");
  setCpuChannelsLast(false);  // layouts are per device: start from the default one
  std::vector<torch::Device> devices;
  std::vector<std::vector<torch::Device>> shards;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    torch::Device d(runsOn(p.deviceOf(specs_[i].name)));
    network_->stageModule(i)->to(d);  // a sharded stage's parameters live on its first device
    devices.push_back(d);
    shards.emplace_back();
    for (const auto& s : p.shardsOf(specs_[i].name)) shards.back().emplace_back(runsOn(s));
  }
  placement_ = p;
  stageDevices_ = std::move(devices);
  stageShards_ = std::move(shards);
}

void SplitExecutor::setSharding(placement::ShardAxis axis, std::map<std::string, std::vector<std::int64_t>> slabSizes) {
  shardAxis_ = axis;
  slabSizes_.clear();
  for (auto& [entry, sizes] : slabSizes) slabSizes_[placement::canonicalEntry(entry)] = std::move(sizes);
}

std::map<std::string, placement::ShardLayout> SplitExecutor::shardLayouts(std::int64_t extent) const {
  // Boundaries on multiples of 2^(deepest level a sharded stage reads or writes): pooling and
  // transposed convolutions then never straddle a boundary.
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < specs_.size(); ++i) index[specs_[i].name] = i;
  std::map<std::string, int> deepest;
  std::map<std::string, std::string> firstStage;
  int overall = 0;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (stageShards_[i].size() < 2) continue;
    int level = specs_[i].level;
    for (const auto& in : specs_[i].inputs)
      if (in != model::kInput) level = std::max(level, specs_[index.at(in)].level);
    const std::string& entry = placement_.entryOf(specs_[i].name);
    deepest[entry] = std::max(deepest[entry], level);
    firstStage.emplace(entry, specs_[i].name);
    overall = std::max(overall, level);
  }
  const std::int64_t multiple = std::int64_t{1} << overall;
  std::map<std::string, placement::ShardLayout> out;
  for (const auto& [entry, level] : deepest) {
    const int count = static_cast<int>(placement::splitShards(entry).size());
    placement::ShardLayout layout;
    auto sized = slabSizes_.find(entry);
    if (sized != slabSizes_.end()) {
      layout.axis = shardAxis_;
      layout.sizes = sized->second;
      if (static_cast<int>(layout.sizes.size()) != count)
        throw InvalidArgument("stage " + firstStage.at(entry) + ": " + std::to_string(layout.sizes.size()) +
                              " slab sizes given for " + std::to_string(count) + " devices (" + entry + ")");
    } else {
      try {
        layout = placement::ShardLayout::even(shardAxis_, extent, count, multiple);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument("stage " + firstStage.at(entry) + ": " + e.what());
      }
    }
    layout.check(extent, multiple, level, firstStage.at(entry));
    out[entry] = layout;
  }
  return out;
}

std::vector<torch::Tensor> toChannelsLast(torch::nn::Module& module) {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> converted;
  for (auto& p : module.parameters()) {
    if (p.dim() != 5 || p.is_contiguous(at::MemoryFormat::ChannelsLast3d)) continue;
    p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast3d));
    converted.push_back(p);
  }
  return converted;
}

void restoreLayout(std::vector<torch::Tensor>& converted) {
  torch::NoGradGuard noGrad;
  for (auto& p : converted) p.set_data(p.contiguous());
  converted.clear();
}

void SplitExecutor::setCpuChannelsLast(bool enabled, bool trainingStages) {
  if (!enabled) {
    restoreLayout(channelsLast_);
    return;
  }
  if (!channelsLast_.empty()) return;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (!stageDevices_[i].is_cpu()) continue;
    if (trainingStages && (stageShards_[i].size() > 1 || precision_.of(specs_[i].name) != placement::Precision::FP32))
      continue;
    for (auto& p : toChannelsLast(*network_->stageModule(i))) channelsLast_.push_back(p);
  }
}

void SplitExecutor::setTimeline(TimelineRecorder* recorder) {
  timeline_ = recorder;
  marks_.reset();
}

std::vector<std::string> SplitExecutor::lanesOf(std::size_t stage) const {
  return placement_.shardsOf(specs_[stage].name);
}

void SplitExecutor::syncForTimeline(const std::vector<torch::Device>& devices) const {
  for (const auto& d : devices)
    if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

void SplitExecutor::finishTimeline(double backwardEnd) {
  if (!timeline_ || !marks_) return;
  std::lock_guard<std::mutex> lock(marks_->mutex);
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const double start = marks_->start[i];
    if (start < 0) continue;
    // A stage whose inputs need no gradient (the first one) ends when backward does.
    const double end = marks_->end[i] >= start ? marks_->end[i] : backwardEnd;
    for (const auto& lane : lanesOf(i)) timeline_->add(lane, specs_[i].name, SpanKind::Backward, start, end);
  }
  marks_.reset();
}

torch::Device SplitExecutor::inputDevice() const { return stageDevices_.front(); }
torch::Device SplitExecutor::outputDevice() const { return stageDevices_.back(); }

torch::Tensor SplitExecutor::moveTo(const torch::Tensor& t, const torch::Device& d) const {
  if (t.device() == d) return t;
  ++moves_;
  if (t.device().is_cpu() && d.is_cuda()) {
    // Pinned host memory lets the copy run asynchronously on the stream.
    return t.pin_memory().to(d, /*non_blocking=*/true);
  }
  // Device-to-host copies stay blocking: the CPU stage reads the data right away.
  return t.to(d, /*non_blocking=*/d.is_cuda());
}

// One forward's outputs between the phases of SplitExecutor::forward.
struct SplitExecutor::ForwardState {
  // Index of each output by name; outputs dropped after their last consumer so inference
  // keeps only live tensors (training keeps what autograd saved anyway).
  std::map<std::string, std::size_t> index, lastUse;
  int dim = 2;
  std::map<std::string, placement::ShardLayout> layouts;
  std::vector<torch::Tensor> outputs;
  std::vector<std::vector<torch::Tensor>> slabs;  // outputs of sharded stages, one per slab
  std::shared_ptr<BackwardMarks> marks;
  torch::Tensor networkInput;
  std::shared_ptr<OffloadChain> offload;
};

torch::Tensor SplitExecutor::forward(const torch::Tensor& input) {
  ForwardState st;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    st.index[specs_[i].name] = i;
    for (const auto& in : specs_[i].inputs) st.lastUse[in] = i;
  }
  st.dim = 2 + static_cast<int>(shardAxis_);
  if (placement_.anySharded()) st.layouts = shardLayouts(input.size(st.dim));
  st.outputs.resize(specs_.size());
  st.slabs.resize(specs_.size());
  if (timeline_ && torch::GradMode::is_enabled()) {
    st.marks = std::make_shared<BackwardMarks>();
    st.marks->start.assign(specs_.size(), -1.0);
    st.marks->end.assign(specs_.size(), -1.0);
    marks_ = st.marks;
  }
  st.networkInput = input;
  if (offload_ && torch::GradMode::is_enabled() && !recompute_.empty()) {
    st.offload = std::make_shared<OffloadChain>(offloadOptions_);
    lastOffload_ = st.offload;
  }
  for (std::size_t i = 0; i < specs_.size(); ++i) forwardStage(st, i);
  const std::size_t last = specs_.size() - 1;
  return (st.slabs[last].empty() ? st.outputs[last] : whole(st, specs_[last].name, stageDevices_[last])).to(torch::kFloat);
}

torch::Tensor SplitExecutor::whole(ForwardState& st, const std::string& name, const torch::Device& d) const {
  // An output as one tensor on d (a sharded output's slabs gathered there).
  if (name == model::kInput) return moveTo(st.networkInput, d);
  const std::size_t j = st.index.at(name);
  if (st.slabs[j].empty()) return moveTo(st.outputs[j], d);
  std::vector<torch::Tensor> parts;
  for (const auto& s : st.slabs[j]) parts.push_back(moveTo(s, d));
  return torch::cat(parts, st.dim);
}

void SplitExecutor::stageInputs(ForwardState& st, std::size_t i, bool bf16, std::vector<torch::Tensor>& inputs,
                                std::vector<std::vector<torch::Tensor>>& slabInputs) const {
  const auto& spec = specs_[i];
  const auto& shards = stageShards_[i];
  // Outside autocast a bf16 activation would meet fp32 weights: cast it up.
  auto cast = [bf16](torch::Tensor in) { return !bf16 && in.scalar_type() == torch::kBFloat16 ? in.to(torch::kFloat) : in; };
  slabInputs.assign(shards.size(), {});
  if (shards.size() == 1) {
    for (const auto& name : spec.inputs) inputs.push_back(cast(whole(st, name, stageDevices_[i])));
    return;
  }
  const std::string& entry = placement_.entryOf(spec.name);
  const auto& layout = st.layouts.at(entry);
  for (const auto& name : spec.inputs) {
    const bool fromInput = name == model::kInput;
    const std::size_t j = fromInput ? 0 : st.index.at(name);
    if (!fromInput && !st.slabs[j].empty() && placement_.entryOf(name) == entry) {
      // Sharded the same way: the slabs pass straight on.
      for (std::size_t s = 0; s < shards.size(); ++s) slabInputs[s].push_back(cast(st.slabs[j][s]));
      continue;
    }
    // Scatter: cut the whole tensor (gathered on the first shard's device if it was sharded otherwise).
    const torch::Tensor src = fromInput ? st.networkInput : st.slabs[j].empty() ? st.outputs[j] : whole(st, name, shards[0]);
    const auto sizes = layout.sizesAt(fromInput ? 0 : specs_[j].level);
    std::int64_t offset = 0;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      slabInputs[s].push_back(cast(moveTo(src.narrow(st.dim, offset, sizes[s]), shards[s])));
      offset += sizes[s];
    }
  }
}

void SplitExecutor::markBackwardEnds(ForwardState& st, std::size_t i, std::vector<torch::Tensor>& inputs,
                                     std::vector<std::vector<torch::Tensor>>& slabInputs) const {
  // The gradient leaves this stage through its inputs. Each stage hooks a view of its own, so a
  // skip tensor read by two stages marks each reader's end, not the later of the two.
  auto marks = st.marks;
  TimelineRecorder* recorder = timeline_;
  auto hookEnd = [&](torch::Tensor& in) {
    if (!in.requires_grad()) return;
    in = in.view_as(in);
    in.register_hook([marks, recorder, i](torch::Tensor grad) {
      std::lock_guard<std::mutex> lock(marks->mutex);
      marks->end[i] = std::max(marks->end[i], recorder->now());
      return grad;
    });
  };
  for (auto& in : inputs) hookEnd(in);
  for (auto& slab : slabInputs)
    for (auto& in : slab) hookEnd(in);
}

void SplitExecutor::forwardStage(ForwardState& st, std::size_t i) {
  const auto& spec = specs_[i];
  const torch::Device& device = stageDevices_[i];
  currentStage_ = spec.name;
  const bool bf16 = precision_.of(spec.name) == placement::Precision::BF16;
  const auto& shards = stageShards_[i];
  const double inputsStart = timeline_ ? timeline_->now() : 0.0;
  const int movesBefore = moves_;
  std::vector<torch::Tensor> inputs;
  std::vector<std::vector<torch::Tensor>> slabInputs;
  stageInputs(st, i, bf16, inputs, slabInputs);
  if (timeline_ && moves_ != movesBefore) {
    syncForTimeline(shards);
    for (const auto& lane : lanesOf(i)) timeline_->add(lane, spec.name, SpanKind::Transfer, inputsStart, timeline_->now());
  }
  if (st.marks) markBackwardEnds(st, i, inputs, slabInputs);
  for (const auto& name : spec.inputs) {
    if (st.lastUse.at(name) != i) continue;
    if (name == model::kInput) {
      st.networkInput = torch::Tensor();
    } else {
      st.outputs[st.index.at(name)] = torch::Tensor();
      st.slabs[st.index.at(name)].clear();
    }
  }
  const double forwardStart = timeline_ ? timeline_->now() : 0.0;
  try {
    if (shards.size() > 1) {
      ShardedStageRun run{network_.get(), i, shards, st.dim, bf16, recompute_.count(spec.name) > 0, st.offload};
      st.slabs[i] = runShardedStage(run, slabInputs);
    } else {
      st.outputs[i] = runWholeStage(i, inputs, bf16, st.offload);
    }
  } catch (const c10::OutOfMemoryError& e) {
    // The CPU's refusal (a budget, HostCachingAllocator) says so itself; CUDA's is the allocator's.
    throw OutOfMemoryError(device.str(), spec.name,
                           (device.is_cuda() ? "CUDA allocator: " : "") + std::string(e.what_without_backtrace()));
  }
  if (timeline_) {
    syncForTimeline(shards);
    const double end = timeline_->now();
    for (const auto& lane : lanesOf(i)) timeline_->add(lane, spec.name, SpanKind::Forward, forwardStart, end);
  }
  if (afterStage_) afterStage_(spec.name, device);
  // Observers and hooks see the first slab of a sharded output.
  observeOutput(st, i, st.slabs[i].empty() ? st.outputs[i] : st.slabs[i].front());
}

torch::Tensor SplitExecutor::runWholeStage(std::size_t i, const std::vector<torch::Tensor>& inputs, bool bf16,
                                           const std::shared_ptr<OffloadChain>& offload) {
  AutocastScope autocast(bf16, stageDevices_[i].type());
  if (!recompute_.count(specs_[i].name) || !torch::GradMode::is_enabled()) return network_->runStage(i, inputs);
  auto stage = [this, i](const std::vector<torch::Tensor>& in) {
    // Called again with grad on during backward: that call is the recompute.
    if (!timeline_ || !torch::GradMode::is_enabled()) return network_->runStage(i, in);
    const double start = timeline_->now();
    auto out = network_->runStage(i, in);
    syncForTimeline(stageShards_[i]);
    for (const auto& lane : lanesOf(i)) timeline_->add(lane, specs_[i].name, SpanKind::Recompute, start, timeline_->now());
    return out;
  };
  return runRecomputed(stage, inputs, network_->stageModule(i)->parameters(), offload);
}

void SplitExecutor::observeOutput(ForwardState& st, std::size_t i, const torch::Tensor& produced) const {
  if (outputObserver_) outputObserver_(specs_[i].name, produced);
  if (st.marks && produced.requires_grad()) {
    auto marks = st.marks;
    TimelineRecorder* recorder = timeline_;
    produced.register_hook([marks, recorder, i](torch::Tensor grad) {
      std::lock_guard<std::mutex> lock(marks->mutex);
      if (marks->start[i] < 0) marks->start[i] = recorder->now();
      return grad;
    });
  }
  if (backwardHook_ && produced.requires_grad()) {
    auto hook = backwardHook_;
    const std::string name = specs_[i].name;
    produced.register_hook([hook, name](torch::Tensor grad) {
      hook(name);
      return grad;
    });
  }
}

} // namespace splitseg::engine
