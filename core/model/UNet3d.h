#pragma once
// The seed 3D U-Net: per level two 3x3x3 conv (+norm) + ReLU, max-pool 2 then dropout on the
// way down, 2x2x2 transposed conv up, concatenated skips, 1x1x1 conv head (logits; the
// sigmoid/softmax lives in the loss and the inferer). Stages: enc0..enc{d-2}, bottleneck,
// dec{d-2}..dec0, head.
#include "core/model/StagedNetwork.h"
#include "core/shard/HaloConv3d.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <vector>

namespace splitseg::model {

enum class Norm { None, Instance, Batch };
std::string toString(Norm n);
Norm normFromString(const std::string& s);

struct UNet3dOptions {
  TORCH_ARG(std::int64_t, in_channels) = 1;
  TORCH_ARG(std::int64_t, out_channels) = 1;
  TORCH_ARG(std::int64_t, base_channels) = 32;
  TORCH_ARG(int, depth) = 5;
  // Dropout after each pool, level 1..depth-1 (the seed: 0.5, 0.5, 0.3, 0.3).
  TORCH_ARG(std::vector<double>, dropout) = std::vector<double>{0.5, 0.5, 0.3, 0.3};
  // Instance norm after each convolution, as nnU-Net and MONAI's U-Nets default to: without it the
  // tiny phantom run failed to train for some seeds (docs/calibration.md, "Engine and model choices").
  TORCH_ARG(Norm, norm) = Norm::Instance;

public:  // TORCH_ARG leaves the section private
  std::string toJson() const;
  static UNet3dOptions fromJson(const std::string& json);
};

// Throws InvalidArgument naming the first field out of range: depth 2..8, in_channels 1..64,
// out_channels 1..256, base_channels 1..256, base_channels << (depth-1) <= 4096, dropout in [0, 1).
void checkUNet3dOptions(const UNet3dOptions& options);

// Two conv(+norm)+ReLU, optionally preceded by pool+dropout (encoder) or transposed conv (decoder).
class UNetStageImpl : public torch::nn::Module {
public:
  enum class Kind { Encoder, Decoder, Head };
  UNetStageImpl(Kind kind, std::int64_t in, std::int64_t out, bool pool, double dropout, Norm norm);
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs);

private:
  Kind kind_;
  bool pool_;
  double dropout_;
  shard::ShardConvTranspose3d up_{nullptr};
  torch::nn::Sequential convs_{nullptr};
  shard::HaloConv3d head_{nullptr};
};
TORCH_MODULE(UNetStage);

class UNet3dImpl : public torch::nn::Module, public StagedNetwork {
public:
  explicit UNet3dImpl(const UNet3dOptions& options = {});

  // Whole network on one device (reference path; the engine runs stages itself).
  torch::Tensor forward(torch::Tensor x);

  std::vector<StageSpec> stageSpecs() const override { return specs_; }
  torch::Tensor runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) override;
  std::shared_ptr<torch::nn::Module> stageModule(std::size_t i) override;
  torch::nn::Module& root() override { return *this; }
  std::int64_t sizeDivisor() const override { return std::int64_t{1} << (options_.depth() - 1); }
  std::int64_t inChannels() const override { return options_.in_channels(); }
  std::int64_t outChannels() const override { return options_.out_channels(); }
  std::string architecture() const override { return "unet3d"; }
  std::string optionsJson() const override { return options_.toJson(); }
  bool supportsSharding() const override { return true; }

  const UNet3dOptions& options() const { return options_; }

private:
  UNet3dOptions options_;
  std::vector<StageSpec> specs_;
  std::vector<UNetStage> stages_;
};
TORCH_MODULE(UNet3d);

} // namespace splitseg::model
