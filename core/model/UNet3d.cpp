#include "core/model/UNet3d.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/shard/HaloConv3d.h"
#include "core/shard/ShardNorm3d.h"

#include <nlohmann/json.hpp>
#include <torch/nn/functional.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>

namespace splitseg::model {

namespace F = torch::nn::functional;

std::string toString(Norm n) {
  switch (n) {
    case Norm::None: return "none";
    case Norm::Instance: return "instance";
    case Norm::Batch: return "batch";
  }
  return "none";
}

Norm normFromString(const std::string& s) {
  if (s == "none") return Norm::None;
  if (s == "instance") return Norm::Instance;
  if (s == "batch") return Norm::Batch;
  throw InvalidArgument("unknown norm '" + s + "' (none, instance, batch)");
}

std::string UNet3dOptions::toJson() const {
  nlohmann::json j{{"in_channels", in_channels()}, {"out_channels", out_channels()},
                   {"base_channels", base_channels()}, {"depth", depth()},
                   {"dropout", dropout()}, {"norm", toString(norm())}};
  return j.dump();
}

namespace {
// Upper bounds: beyond them a shift passes 64 bits or a layer needs absurd memory.
constexpr std::int64_t kMaxDepth = 8, kMaxInChannels = 64, kMaxOutChannels = 256, kMaxBaseChannels = 256,
                       kMaxWidestChannels = 4096;

void checkRange(const char* field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi)
    throw InvalidArgument(std::string("U-Net option ") + field + " is " + std::to_string(v) + "; allowed " +
                          std::to_string(lo) + ".." + std::to_string(hi));
}
} // namespace

void checkUNet3dOptions(const UNet3dOptions& o) {
  checkRange("depth", o.depth(), 2, kMaxDepth);
  checkRange("in_channels", o.in_channels(), 1, kMaxInChannels);
  checkRange("out_channels", o.out_channels(), 1, kMaxOutChannels);
  checkRange("base_channels", o.base_channels(), 1, kMaxBaseChannels);
  const std::int64_t widest = o.base_channels() << (o.depth() - 1);
  if (widest > kMaxWidestChannels)
    throw InvalidArgument("U-Net option base_channels " + std::to_string(o.base_channels()) + " with depth " +
                          std::to_string(o.depth()) + " makes a " + std::to_string(widest) + "-channel bottleneck; at most " +
                          std::to_string(kMaxWidestChannels));
  for (const double p : o.dropout())
    if (!(p >= 0.0 && p < 1.0)) throw InvalidArgument("U-Net option dropout holds " + std::to_string(p) + "; allowed 0 <= p < 1");
}

UNet3dOptions UNet3dOptions::fromJson(const std::string& text) {
  UNet3dOptions o;
  try {
    auto j = parseJson(text, "U-Net options");
    if (!j.is_object()) throw InvalidArgument("bad U-Net options: not a JSON object");
    // Read wide, check, then narrow: a huge depth must not wrap into a small one.
    auto wide = [&](const char* field, std::int64_t fallback) {
      if (!j.contains(field)) return fallback;
      if (!j[field].is_number_integer()) throw InvalidArgument(std::string("U-Net option ") + field + " must be an integer");
      if (j[field].is_number_unsigned() && j[field].get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        return INT64_MAX;
      return j[field].get<std::int64_t>();
    };
    o.in_channels(wide("in_channels", o.in_channels()));
    o.out_channels(wide("out_channels", o.out_channels()));
    o.base_channels(wide("base_channels", o.base_channels()));
    const std::int64_t depth = wide("depth", o.depth());
    checkRange("depth", depth, 2, kMaxDepth);
    o.depth(static_cast<int>(depth));
    o.dropout(j.value("dropout", o.dropout()));
    o.norm(normFromString(j.value("norm", toString(o.norm()))));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("bad U-Net options: ") + e.what());
  }
  checkUNet3dOptions(o);
  return o;
}

namespace {
void addConvBlock(torch::nn::Sequential& seq, std::int64_t in, std::int64_t out, Norm norm) {
  // Shard-aware layers: LibTorch's own outside a sharded stage (same parameter names).
  seq->push_back(shard::HaloConv3d(torch::nn::Conv3dOptions(in, out, 3).padding(1)));
  if (norm == Norm::Instance)
    seq->push_back(shard::ShardInstanceNorm3d(torch::nn::InstanceNorm3dOptions(out).affine(true)));
  else if (norm == Norm::Batch)
    seq->push_back(shard::ShardBatchNorm3d(out));
  // In-place ReLU: saves one activation per conv; autograd still has what it needs.
  seq->push_back(torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)));
}
} // namespace

UNetStageImpl::UNetStageImpl(Kind kind, std::int64_t in, std::int64_t out, bool pool, double dropout,
                             Norm norm)
    : kind_(kind), pool_(pool), dropout_(dropout) {
  if (kind == Kind::Head) {
    head_ = register_module("head", shard::HaloConv3d(torch::nn::Conv3dOptions(in, out, 1)));
    return;
  }
  std::int64_t convIn = in;
  if (kind == Kind::Decoder) {
    // in = channels from below; the transposed conv halves them, the skip brings them back.
    up_ = register_module("up", shard::ShardConvTranspose3d(
                                    torch::nn::ConvTranspose3dOptions(in, out, 2).stride(2)));
    convIn = 2 * out;
  }
  convs_ = torch::nn::Sequential();
  addConvBlock(convs_, convIn, out, norm);
  addConvBlock(convs_, out, out, norm);
  register_module("convs", convs_);
}

torch::Tensor UNetStageImpl::forward(const std::vector<torch::Tensor>& inputs) {
  if (kind_ == Kind::Head) return head_->forward(inputs.at(0));
  torch::Tensor x;
  if (kind_ == Kind::Decoder) {
    TORCH_CHECK(inputs.size() == 2, "decoder stage needs (below, skip)");
    x = torch::cat({up_->forward(inputs[0]), inputs[1]}, 1);
  } else {
    x = inputs.at(0);
    if (pool_) {
      x = F::max_pool3d(x, F::MaxPool3dFuncOptions(2));
      if (dropout_ > 0) x = F::dropout(x, F::DropoutFuncOptions().p(dropout_).training(is_training()));
    }
  }
  return convs_->forward(x);
}

UNet3dImpl::UNet3dImpl(const UNet3dOptions& o) : options_(o) {
  checkUNet3dOptions(o);
  const int d = o.depth();
  std::vector<double> drop = o.dropout();
  drop.resize(static_cast<std::size_t>(d - 1), drop.empty() ? 0.0 : drop.back());

  auto ch = [&](int level) { return o.base_channels() << level; };
  auto add = [&](StageSpec spec, UNetStage stage) {
    stages_.push_back(register_module(spec.name, stage));
    specs_.push_back(std::move(spec));
  };
  using K = UNetStageImpl::Kind;
  for (int l = 0; l < d - 1; ++l) {
    const std::string prev = l == 0 ? kInput : "enc" + std::to_string(l - 1);
    const std::int64_t in = l == 0 ? o.in_channels() : ch(l - 1);
    add({"enc" + std::to_string(l), {prev}, in, ch(l), l},
        UNetStage(K::Encoder, in, ch(l), l > 0, l > 0 ? drop[l - 1] : 0.0, o.norm()));
  }
  add({"bottleneck", {"enc" + std::to_string(d - 2)}, ch(d - 2), ch(d - 1), d - 1},
      UNetStage(K::Encoder, ch(d - 2), ch(d - 1), true, drop[d - 2], o.norm()));
  for (int l = d - 2; l >= 0; --l) {
    const std::string below = l == d - 2 ? "bottleneck" : "dec" + std::to_string(l + 1);
    add({"dec" + std::to_string(l), {below, "enc" + std::to_string(l)}, ch(l + 1), ch(l), l},
        UNetStage(K::Decoder, ch(l + 1), ch(l), false, 0.0, o.norm()));
  }
  add({"head", {"dec0"}, ch(0), o.out_channels(), 0},
      UNetStage(K::Head, ch(0), o.out_channels(), false, 0.0, o.norm()));
}

torch::Tensor UNet3dImpl::runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) {
  return stages_.at(i)->forward(inputs);
}

std::shared_ptr<torch::nn::Module> UNet3dImpl::stageModule(std::size_t i) {
  return stages_.at(i).ptr();
}

torch::Tensor UNet3dImpl::forward(torch::Tensor x) {
  std::map<std::string, torch::Tensor> outputs{{kInput, x}};
  torch::Tensor last;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    std::vector<torch::Tensor> in;
    for (const auto& name : specs_[i].inputs) in.push_back(outputs.at(name));
    last = runStage(i, in);
    outputs[specs_[i].name] = last;
  }
  return last;
}

} // namespace splitseg::model
