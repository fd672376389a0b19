#pragma once
// The layer structure of a StagedNetwork, read once from its modules and stage specs, as plain
// numbers. The memory planner evaluates it thousands of times (auto-placement, largest-volume
// search), so it must not touch LibTorch after extraction.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace splitseg::model {
class StagedNetwork;
struct UNet3dOptions;
} // namespace splitseg::model

namespace splitseg::placement {

enum class LayerKind { Conv, ConvTranspose, Norm, ReLU, MaxPool, Dropout, Concat };
std::string toString(LayerKind k);

struct LayerSpec {
  LayerKind kind = LayerKind::Conv;
  std::int64_t inChannels = 0;
  std::int64_t outChannels = 0;
  int kernel = 1;            // cubic kernels (the U-Net's are); conv, transposed conv, pool
  int stride = 1;
  int padding = 0;
  bool inplace = false;      // ReLU
  double p = 0;              // dropout probability
  std::int64_t parameters = 0;
  std::int64_t largestParameter = 0;  // numel of its largest parameter tensor (Adam temporaries)
};

struct StageStructure {
  std::string name;
  std::vector<std::string> inputs;  // as in StageSpec: earlier stages or model::kInput
  std::vector<LayerSpec> layers;    // forward order; Concat joins the running tensor with inputs[1..]
  std::int64_t parameters = 0;
};

struct NetworkStructure {
  std::vector<StageStructure> stages;
  std::int64_t inChannels = 1;
  std::int64_t outChannels = 1;
  std::int64_t sizeDivisor = 1;

  // Walks each stage module's leaf submodules (Conv3d, ConvTranspose3d, Instance/BatchNorm3d,
  // ReLU) in registration order. Operations a stage performs functionally are inferred from its
  // StageSpec: a level increase over its first input is a max-pool, a second input a concat after
  // the up-sampling. Dropout is functional too: its probability per stage comes from `dropout`,
  // or, when empty and the network is the built-in UNet3d, from the U-Net's options.
  static NetworkStructure fromNetwork(model::StagedNetwork& network,
                                      const std::map<std::string, double>& dropout = {});
  // Builds the U-Net (weights on CPU; ~90 MB for the seed) just to read its structure.
  static NetworkStructure fromUNet(const model::UNet3dOptions& options);

  std::vector<std::string> stageNames() const;
  std::int64_t parameters() const;
  int indexOf(const std::string& stage) const;  // -1 when unknown
};

} // namespace splitseg::placement
