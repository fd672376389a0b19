#include "plugins/resunet3d/ResUNet3d.h"
#include "plugins/PluginApi.h"

#include <nlohmann/json.hpp>
#include <torch/nn/functional.h>
#include <torch/nn/modules/instancenorm.h>

#include <map>
#include <stdexcept>

namespace splitseg::resunet {

namespace F = torch::nn::functional;

std::string ResUNet3dOptions::toJson() const {
  return nlohmann::json{{"in_channels", inChannels}, {"out_channels", outChannels},
                        {"base_channels", baseChannels}, {"depth", depth}}
      .dump();
}

ResUNet3dOptions ResUNet3dOptions::fromJson(const std::string& text) {
  ResUNet3dOptions o;
  nlohmann::json j;
  try {
    j = text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
    if (!j.is_object()) throw std::invalid_argument("options must be a JSON object");
    for (const auto& [key, value] : j.items())
      if (key != "in_channels" && key != "out_channels" && key != "base_channels" && key != "depth")
        throw std::invalid_argument("unknown option '" + key +
                                    "' (in_channels, out_channels, base_channels, depth)");
    for (const char* k : {"in_channels", "out_channels", "base_channels", "depth"})
      if (j.contains(k) && (!j[k].is_number_integer() || (j[k].is_number_unsigned() && j[k].get<std::uint64_t>() > 1000000)))
        throw std::invalid_argument(std::string(k) + " must be an integer of sane size");
    o.inChannels = j.value("in_channels", o.inChannels);
    o.outChannels = j.value("out_channels", o.outChannels);
    o.baseChannels = j.value("base_channels", o.baseChannels);
    const std::int64_t depth = j.value("depth", std::int64_t{o.depth});
    o.depth = depth < 2 || depth > 7 ? 0 : static_cast<int>(depth);  // refused below, never wrapped
  } catch (const std::exception& e) {
    // The registry turns any exception into a message; say which network refused what.
    throw std::invalid_argument(std::string("resunet3d options: ") + e.what());
  }
  if (o.depth < 2 || o.depth > 7) throw std::invalid_argument("resunet3d: depth must be 2..7");
  if (o.inChannels < 1 || o.outChannels < 1 || o.baseChannels < 1)
    throw std::invalid_argument("resunet3d: channel counts must be positive");
  if (o.inChannels > 64) throw std::invalid_argument("resunet3d: in_channels " + std::to_string(o.inChannels) + " is above 64");
  if (o.outChannels > 256) throw std::invalid_argument("resunet3d: out_channels " + std::to_string(o.outChannels) + " is above 256");
  if (o.baseChannels > 256) throw std::invalid_argument("resunet3d: base_channels " + std::to_string(o.baseChannels) + " is above 256");
  if ((o.baseChannels << (o.depth - 1)) > 4096)
    throw std::invalid_argument("resunet3d: base_channels << (depth-1) is " + std::to_string(o.baseChannels << (o.depth - 1)) +
                                " channels; at most 4096");
  return o;
}

namespace {
torch::nn::Conv3d conv3(std::int64_t in, std::int64_t out) {
  return torch::nn::Conv3d(torch::nn::Conv3dOptions(in, out, 3).padding(1));
}
torch::nn::InstanceNorm3d norm(std::int64_t c) {
  return torch::nn::InstanceNorm3d(torch::nn::InstanceNorm3dOptions(c).affine(true));
}
torch::nn::ReLU relu() { return torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)); }
} // namespace

ResStageImpl::ResStageImpl(Kind kind, std::int64_t in, std::int64_t out, std::int64_t headOut) : kind_(kind) {
  std::int64_t entryIn = in;
  if (kind == Kind::Decoder || kind == Kind::Head) {
    // in = channels from below; up-sampling halves them and the skip brings them back.
    up_ = register_module("up", torch::nn::ConvTranspose3d(torch::nn::ConvTranspose3dOptions(in, out, 2).stride(2)));
    entryIn = 2 * out;
  }
  entry_ = register_module("entry", torch::nn::Sequential(conv3(entryIn, out), norm(out), relu()));
  residual_ = register_module("residual", torch::nn::Sequential(conv3(out, out), norm(out), relu(), conv3(out, out), norm(out)));
  act_ = register_module("act", relu());
  if (kind == Kind::Head)
    out_ = register_module("out", torch::nn::Conv3d(torch::nn::Conv3dOptions(out, headOut, 1)));
}

torch::Tensor ResStageImpl::forward(const std::vector<torch::Tensor>& inputs) {
  torch::Tensor x;
  if (kind_ == Kind::Decoder || kind_ == Kind::Head) {
    TORCH_CHECK(inputs.size() == 2, "resunet3d: an up-sampling stage needs (below, skip)");
    x = torch::cat({up_->forward(inputs[0]), inputs[1]}, 1);
  } else {
    x = inputs.at(0);
    if (kind_ == Kind::Encoder) x = F::max_pool3d(x, F::MaxPool3dFuncOptions(2));
  }
  x = entry_->forward(x);
  // Out-of-place add: x is saved by the residual's first conv for backward.
  x = act_->forward(x + residual_->forward(x));
  return kind_ == Kind::Head ? out_->forward(x) : x;
}

ResUNet3dImpl::ResUNet3dImpl(const ResUNet3dOptions& o) : options_(o) {
  const int d = o.depth;
  auto ch = [&](int level) { return o.baseChannels << level; };
  auto add = [&](model::StageSpec spec, ResStage stage) {
    stages_.push_back(register_module(spec.name, stage));
    specs_.push_back(std::move(spec));
  };
  using K = ResStageImpl::Kind;
  add({"stem", {model::kInput}, o.inChannels, ch(0), 0}, ResStage(K::Stem, o.inChannels, ch(0), 0));
  auto encName = [&](int l) { return l == 0 ? std::string("stem") : "enc" + std::to_string(l); };
  for (int l = 1; l < d - 1; ++l)
    add({encName(l), {encName(l - 1)}, ch(l - 1), ch(l), l}, ResStage(K::Encoder, ch(l - 1), ch(l), 0));
  add({"bottleneck", {encName(d - 2)}, ch(d - 2), ch(d - 1), d - 1}, ResStage(K::Encoder, ch(d - 2), ch(d - 1), 0));
  std::string below = "bottleneck";
  for (int l = d - 2; l >= 1; --l) {
    const std::string name = "dec" + std::to_string(l);
    add({name, {below, encName(l)}, ch(l + 1), ch(l), l}, ResStage(K::Decoder, ch(l + 1), ch(l), 0));
    below = name;
  }
  // The head joins the full-resolution stem and ends in the 1x1x1 conv to the outputs.
  add({"head", {below, "stem"}, ch(1), o.outChannels, 0}, ResStage(K::Head, ch(1), ch(0), o.outChannels));
}

torch::Tensor ResUNet3dImpl::runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) {
  return stages_.at(i)->forward(inputs);
}

torch::Tensor ResUNet3dImpl::forward(torch::Tensor x) {
  std::map<std::string, torch::Tensor> outputs{{model::kInput, x}};
  torch::Tensor last;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    std::vector<torch::Tensor> in;
    for (const auto& name : specs_[i].inputs) in.push_back(outputs.at(name));
    last = runStage(i, in);
    outputs[specs_[i].name] = last;
  }
  return last;
}

} // namespace splitseg::resunet

namespace {
std::shared_ptr<splitseg::model::StagedNetwork> createResUNet(const std::string& optionsJson) {
  return splitseg::resunet::ResUNet3d(splitseg::resunet::ResUNet3dOptions::fromJson(optionsJson)).ptr();
}

const splitseg::plugin::ArchitecturePlugin kPlugin = [] {
  splitseg::plugin::ArchitecturePlugin p;
  p.name = "resunet3d";
  p.description = "Residual 3D U-Net: instance norm, residual units, stages stem/enc*/bottleneck/dec*/head";
  p.defaultOptionsJson = R"({"in_channels":1,"out_channels":1,"base_channels":16,"depth":5})";
  p.create = &createResUNet;
  return p;
}();
} // namespace

extern "C" __attribute__((visibility("default"))) const splitseg::plugin::ArchitecturePlugin* SPLITSEG_PLUGIN_ENTRY() {
  return &kPlugin;
}
