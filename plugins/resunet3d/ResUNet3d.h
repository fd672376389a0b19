#pragma once
// A residual 3D U-Net with instance norm, shipped as a plugin to prove that a second
// architecture goes through the plugin interface unchanged.
//
// Stages (depth d, levels 0..d-1): stem, enc1..enc{d-2}, bottleneck, dec{d-2}..dec1, head.
//  - stem (level 0): entry conv block in->C, one residual unit.
//  - encL / bottleneck: max-pool 2 (functional, the planner infers it from the level), entry
//    conv block, residual unit.
//  - decL: 2x2x2 transposed conv up, concat with the skip of encL, entry conv block, residual unit.
//  - head (level 0): up from dec1, concat with the stem, entry conv block, residual unit,
//    1x1x1 conv to the output channels (logits).
// Entry conv block = conv3 + InstanceNorm + ReLU; residual unit = relu(x + IN(conv3(relu(IN(conv3(x)))))).
// The channel change happens in the entry block, so the residual unit needs no projection
// convolution: every registered leaf is one the planner models in forward order, and the
// identity add is memory-neutral in its model (the skip is already kept alive as the saved
// input of the unit's first conv, and the add's output replaces the norm output it consumes).
#include "core/model/StagedNetwork.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace splitseg::resunet {

struct ResUNet3dOptions {
  std::int64_t inChannels = 1;
  std::int64_t outChannels = 1;
  std::int64_t baseChannels = 16;
  int depth = 5;

  std::string toJson() const;
  static ResUNet3dOptions fromJson(const std::string& json);
};

class ResStageImpl : public torch::nn::Module {
public:
  enum class Kind { Stem, Encoder, Decoder, Head };
  ResStageImpl(Kind kind, std::int64_t in, std::int64_t out, std::int64_t headOut);
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs);

private:
  Kind kind_;
  torch::nn::ConvTranspose3d up_{nullptr};
  torch::nn::Sequential entry_{nullptr};
  torch::nn::Sequential residual_{nullptr};
  torch::nn::ReLU act_{nullptr};
  torch::nn::Conv3d out_{nullptr};
};
TORCH_MODULE(ResStage);

class ResUNet3dImpl : public torch::nn::Module, public model::StagedNetwork {
public:
  explicit ResUNet3dImpl(const ResUNet3dOptions& options = {});
  torch::Tensor forward(torch::Tensor x);  // whole network on one device (reference path)

  std::vector<model::StageSpec> stageSpecs() const override { return specs_; }
  torch::Tensor runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) override;
  std::shared_ptr<torch::nn::Module> stageModule(std::size_t i) override { return stages_.at(i).ptr(); }
  torch::nn::Module& root() override { return *this; }
  std::int64_t sizeDivisor() const override { return std::int64_t{1} << (options_.depth - 1); }
  std::int64_t inChannels() const override { return options_.inChannels; }
  std::int64_t outChannels() const override { return options_.outChannels; }
  std::string architecture() const override { return "resunet3d"; }
  std::string optionsJson() const override { return options_.toJson(); }

private:
  ResUNet3dOptions options_;
  std::vector<model::StageSpec> specs_;
  std::vector<ResStage> stages_;
};
TORCH_MODULE(ResUNet3d);

} // namespace splitseg::resunet
