#pragma once
// Export of a trained network as TorchScript for use outside SplitSeg (Python's torch.jit.load,
// LibTorch's torch::jit::load), with the preprocessing it expects written beside it as JSON.
//
// C++ LibTorch cannot script an nn::Module, so the exporter mirrors the module tree into a
// torch::jit::Module (same names, same parameter and buffer tensors) and records `forward` by
// running the network's stages once under the JIT tracer with that module as `self`. Every
// weight becomes an attribute read, so the file holds ordinary named parameters
// (e.g. `enc0.convs.0.weight`) and works for any StagedNetwork, plugins included. The graph is
// shape-generic for the ops the networks use (conv, norm, pool, cat, add): any input whose
// spatial size is a multiple of sizeDivisor works, not just the tracing example's.
#include "core/model/StagedNetwork.h"

#include <array>
#include <string>

namespace splitseg::exporter {

struct ExportOptions {
  std::array<std::int64_t, 3> exampleSize{0, 0, 0};  // z,y,x of the tracing input; 0: 2*sizeDivisor
  std::string preprocessingJson = "{}";              // from the checkpoint (engine::CheckpointInfo)
  std::array<std::int64_t, 3> patch{0, 0, 0};        // training patch (x,y,z), recommended window
};

struct ExportResult {
  std::string modelPath;
  std::string preprocessingPath;  // <model stem>.preprocessing.json
  std::int64_t parameters = 0;
};

// Writes `path` (TorchScript) and its preprocessing JSON. The network is put in eval mode and
// on the CPU (merged from whatever placement it had). Throws splitseg::Error on failure.
ExportResult exportTorchScript(model::StagedNetwork& network, const std::string& path, const ExportOptions& options = {});

// Path of the JSON written beside a model: "dir/model.pt" -> "dir/model.preprocessing.json".
std::string preprocessingPathFor(const std::string& modelPath);

} // namespace splitseg::exporter
