#pragma once
// The checkpoint file. One zip in PyTorch's own serialization format whose pickle holds only
// plain values — dicts with string keys, strings, numbers and tensors — so that Python reads it
// with torch.load(path, weights_only=True) and LibTorch's unpickler reads it here without any
// class or code (the old TorchScript archives could carry code that ran on load). Layout:
//   {"format": "splitseg-checkpoint",
//    "meta": "<JSON: version, run description, step, sampler state>",
//    "model": {name: tensor}                 parameters and buffers, as root().named_* name them
//    "adam": {name: {"step": int, "exp_avg": tensor, "exp_avg_sq": tensor[, "max_exp_avg_sq"]}}
//    "adam_options": {"lr", "beta1", "beta2", "eps", "weight_decay": float, "amsgrad": bool}
//    "rng": {"cpu": tensor, "cuda:0": tensor, ...}}
// Lists are avoided on purpose: LibTorch pickles typed lists through torch.jit helpers that
// weights_only refuses.
#include "core/run/CheckpointInfo.h"

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

namespace torch::nn { class Module; }
namespace torch::optim { class Adam; }

namespace splitseg::checkpoint {

struct CheckpointFile {
  struct Moments {
    std::int64_t step = 0;
    torch::Tensor expAvg, expAvgSq, maxExpAvgSq;  // maxExpAvgSq: amsgrad only
  };
  struct AdamOptions {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
    bool amsgrad = false;
  };

  run::CheckpointInfo info;
  std::map<std::string, torch::Tensor> model;
  std::map<std::string, Moments> adam;
  AdamOptions adamOptions;
  std::map<std::string, torch::Tensor> rng;

  // Everything a network and its optimizer hold (on the CPU), plus LibTorch's generators.
  static CheckpointFile capture(torch::nn::Module& root, torch::optim::Adam& optimizer, run::CheckpointInfo info);

  // Atomic and durable (unique temporary, fsync, rename). Throws IoError naming path.
  void write(const std::string& path) const;
  std::vector<char> serialize() const;
  // One read of a regular file; refuses anything else with a FormatError naming path: other
  // zips, the old TorchScript format (with how to convert it), damaged or oversized files, and
  // any value of the wrong kind.
  static CheckpointFile read(const std::string& path);
  // How many files read() has read in this process (a resumed run reads its checkpoint once).
  static std::int64_t readsSoFar();
  static CheckpointFile parse(const std::vector<char>& bytes, const std::string& path);

  // Checks every tensor against the module (names, shapes, dtypes, finite values) and, with an
  // optimizer, the Adam moments against their parameters and the generator states against this
  // machine's — all before anything is used — then copies the weights in; with an optimizer also
  // its moments and options and LibTorch's generators (resuming). Throws FormatError naming the
  // first mismatching tensor, with module and optimizer untouched.
  void loadInto(torch::nn::Module& root, torch::optim::Adam* optimizer, const std::string& path) const;
};

// Whether path holds a TorchScript archive (the format before version 3).
bool isLegacyCheckpoint(const std::string& path);

} // namespace splitseg::checkpoint
