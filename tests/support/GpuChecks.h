#pragma once
// Device checks shared by the Qt suites (CudaTest, SplitExecutorTest) and the plain executable
// the bare accelerator machine runs (tests/gpu/gpu_checks.cpp, no Qt there). Each check runs on a
// device ("cuda:0"; "cpu" when rehearsing without a GPU, where cross-device rows collapse to one
// device) and returns pass/fail/skip with the figures it measured. Qt-free.
#include "core/model/StagedNetwork.h"

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <string>
#include <vector>

namespace splitseg::checks {

struct CheckResult {
  enum class Status { Pass, Fail, Skip };
  std::string name;
  Status status = Status::Pass;
  std::string detail;       // why it failed or skipped; empty on success
  nlohmann::json figures = nlohmann::json::object();
  bool ok() const { return status != Status::Fail; }
  nlohmann::json toJson() const;
};

// Exact fp32 for equivalence runs while alive: TF32 off for cuDNN and cuBLAS, deterministic
// cuDNN, no benchmark search. Restores the previous settings.
class ExactFp32Guard {
public:
  ExactFp32Guard();
  ~ExactFp32Guard();
  ExactFp32Guard(const ExactFp32Guard&) = delete;
  ExactFp32Guard& operator=(const ExactFp32Guard&) = delete;

private:
  bool tf32CuDNN_, tf32CuBLAS_, deterministic_, benchmark_;
};

// Largest |a - b| and whether every element satisfies |a - b| <= atol + rtol * |b| (b: reference).
struct Closeness {
  double maxAbs = 0;
  bool within = true;
};
Closeness compare(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol);

// Whether two lists of tensors are equal element for element (a snapshot before and after).
bool allEqual(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);

// A U-Net wired by hand (decoder l takes encoder l's output), independent of the stage specs the
// executor follows. Each stage runs on the device its parameters live on, with its inputs moved
// there first, so dropout draws from that device's generator in the executor's order: with the
// same seed it reproduces the executor's masks on every device.
torch::Tensor referenceForward(model::StagedNetwork& net, int depth, const torch::Tensor& x);

// The device the checks use here: "cuda:0" when CUDA is present, else "cpu".
std::string checkDevice();

// Cross-device equivalence without dropout: the unsplit CPU model vs the executor with every
// stage on `device` and with three cuda/cpu splits; outputs and every gradient within tolerance
// (rtol 1e-4, atol 1e-5 across devices; 1e-6 on one device).
CheckResult splitEquivalence(const std::string& device, int edge = 16);
// Sharded stages across the CPU and `device` (slabs on two devices, halos copied between them):
// outputs and every gradient vs the unsharded CPU model, as splitEquivalence. Skipped on "cpu".
CheckResult shardEquivalence(const std::string& device, int edge = 32);
// Dropout on: the executor vs referenceForward with stages on their own devices (same seed, same
// masks): within 1e-5; the same seed twice gives identical outputs, another seed different ones.
CheckResult dropoutReproduced(const std::string& device, int edge = 16);
// Two training steps (no dropout) with every stage on `device` vs on the CPU: losses and weights
// within tolerance; the memory figures of a split step are consistent with what it holds.
CheckResult trainingEquivalence(const std::string& device, int edge = 32);
// Training with dropout on `device`: steps 1-3 in one run vs steps 1, then 2-3 after a checkpoint
// and a fresh trainer: weights bit-identical (needs the device's generator state in the checkpoint).
CheckResult resumeExact(const std::string& device, const std::string& workDir, int edge = 32);
// Host offload on `device`: every stage recomputed, saved inputs through pinned host memory and
// the copy stream, vs the same run keeping them on the device: outputs and gradients within 1e-6,
// every copy made and returned, the next stage's prefetched; peaks of both as figures. Skipped on "cpu".
CheckResult offloadEquivalence(const std::string& device, int edge = 32);
// The measured CUDA allowance (context, cuDNN workspace) and the cuDNN version warnings.
CheckResult allowance(const std::string& device);

} // namespace splitseg::checks
