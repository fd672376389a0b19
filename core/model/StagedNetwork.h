#pragma once
// A network seen as an ordered list of named stages. Each stage reads explicit tensors
// produced by earlier stages (or the network input) and returns one tensor; nothing is
// kept between stages, so stages can be placed on different devices, checkpointed, or
// (later) pipelined. The built-in U-Net and plugin architectures implement this.
#include <torch/nn/module.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace splitseg::model {

// Name of the network input as it appears in StageSpec::inputs.
inline const std::string kInput = "input";

struct StageSpec {
  std::string name;                 // "enc0", "dec3", "head", ...
  std::vector<std::string> inputs;  // names of earlier stages (or kInput), in call order
  std::int64_t inChannels = 0;      // channels of the first input
  std::int64_t outChannels = 0;
  int level = 0;                    // resolution level: output spatial size = input size / 2^level
};

class StagedNetwork {
public:
  virtual ~StagedNetwork() = default;
  virtual std::vector<StageSpec> stageSpecs() const = 0;
  // Runs stage i on its inputs (already on the stage's device). Returns its output.
  virtual torch::Tensor runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) = 0;
  // The module that holds the parameters of stage i.
  virtual std::shared_ptr<torch::nn::Module> stageModule(std::size_t i) = 0;
  // The whole network as one module (parameters, train/eval, serialisation).
  virtual torch::nn::Module& root() = 0;
  // Input spatial sizes must be multiples of this.
  virtual std::int64_t sizeDivisor() const = 0;
  virtual std::int64_t inChannels() const = 0;
  virtual std::int64_t outChannels() const = 0;
  // Architecture name and options as JSON text (for checkpoints and sessions).
  virtual std::string architecture() const = 0;
  virtual std::string optionsJson() const = 0;
  // Whether a stage may run sharded over several devices: its layers must be the shard-aware
  // ones (core/shard), which take halos and whole-volume statistics from their neighbours.
  virtual bool supportsSharding() const { return false; }

  std::vector<std::string> stageNames() const;
  std::int64_t parameterCount();
  std::int64_t stageParameterCount(std::size_t i);
};

} // namespace splitseg::model
