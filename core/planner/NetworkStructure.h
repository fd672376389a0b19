#pragma once
// The layer structure of a staged network as plain numbers, read once from its modules by
// core/model (model::networkStructure). The memory planner evaluates it thousands of times
// (auto-placement, largest-volume search); no LibTorch here.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace splitseg::planner {

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
  // Conv: SplitSeg's own module (shard::HaloConv3d), whose slabs and micro-batches run the kernel
  // LibTorch picks for the whole layer or batch (shard::callsOneDnn); false for LibTorch's Conv3d.
  bool followsWhole = false;
  // Norm: its output is a view of the normalised tensor (LibTorch's instance_norm reshapes to a
  // batch norm over N*C channels and views the result back). An in-place op on that view makes
  // autograd rebase the base's history (CopySlices), whose backward copies the gradient.
  bool outputIsView = false;
  double p = 0;              // dropout probability
  std::int64_t parameters = 0;
  std::int64_t largestParameter = 0;  // numel of its largest parameter tensor (Adam temporaries)
};

struct StageStructure {
  std::string name;
  std::vector<std::string> inputs;  // as in StageSpec: earlier stages or "input"
  std::vector<LayerSpec> layers;    // forward order; Concat joins the running tensor with inputs[1..]
  std::int64_t parameters = 0;
};

struct NetworkStructure {
  std::vector<StageStructure> stages;
  std::int64_t inChannels = 1;
  std::int64_t outChannels = 1;
  std::int64_t sizeDivisor = 1;

  std::vector<std::string> stageNames() const;
  std::int64_t parameters() const;
  int indexOf(const std::string& stage) const;  // -1 when unknown
};

} // namespace splitseg::planner
