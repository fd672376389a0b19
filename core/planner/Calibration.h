#pragma once
// The planner's measured and fitted constants, in one place. Each line names the measurement it
// comes from; what was measured, on which host, and how each value got here: docs/calibration.md
// (written by tests/bench/report_calibration.py from docs/bench/ and this file).
#include <cstdint>

namespace splitseg::planner::calibration {

// Device allowances: memory outside the tensor replay (PlannerOptions, MemoryPlanner::allowanceFor).
// Planning-only GPUs (no start-up probe): CUDA context + kernels. A default, not measured.
inline constexpr std::int64_t kCudaContextBytes = std::int64_t{500} << 20;
// Planning-only GPUs: cuDNN's convolution workspace. A default, not measured.
inline constexpr std::int64_t kCudnnWorkspaceBytes = std::int64_t{256} << 20;
// A CPU process's resident growth beyond its tensors: tests/bench's "fit" planner runs (results.jsonl plan:*).
inline constexpr std::int64_t kCpuAllowanceBytes = std::int64_t{86} << 20;

// CUDA convolution transients, in input + output sizes (StepSimulator).
// Backward: fitted to an H200 lease's training peaks (docs/bench/gpu.json history).
inline constexpr double kCudaConvBackwardScratch = 1.0;
// Forward: fitted to the H100 lease's `infer` peaks (docs/bench/gpu.json "inference_memory").
inline constexpr double kCudaConvForwardScratch = 1.0;

// CPU convolution transients (CpuConvScratch.cpp), from single layers traced with CpuMemoryCounter.
// fp32 oneDNN 3x3x3 reorders, in blocked input + output sizes (tests/core/planner/CpuConvScratchTest).
inline constexpr double kCpuOneDnnForwardScratch = 1.0;
inline constexpr double kCpuOneDnnBackwardScratch = 1.0;
// oneDNN's channel block: fp32 and bf16 on AVX-512 (nCdhw16c), fp32 on AVX2 (nCdhw8c).
inline constexpr int kOneDnnAvx512Block = 16;
inline constexpr int kOneDnnAvx2Block = 8;
// bf16 oneDNN kernels' channel block (PlannerOptions::cpuBf16ChannelBlock).
inline constexpr int kCpuBf16ChannelBlock = 16;
// bf16 2x2x2 transposed backward, in padded inputs: fewer input channels than a block, fewer
// output channels, both full blocks (batch-1 single layers).
inline constexpr double kBf16TransposedBackwardFewIn = 1.0;
inline constexpr double kBf16TransposedBackwardFewOut = 3.0;
inline constexpr double kBf16TransposedBackwardBlocked = 10.5;
// bf16 3x3x3 from a full block: weight copies each thread holds in backward (~3, traced).
inline constexpr double kBf16BackwardWeightCopiesPerThread = 3.0;
// bf16 3x3x3 from a plain input: the blocked output gradient per thread is at least this many channels.
inline constexpr int kBf16OutputGradientChannelsPerThread = 16;

// Step time (StepTime.cpp): the planner's FLOPs of a measured step over its median time.
// `splitseg-cli plan --patch 256` (seed network): summed stage FLOPs of one training step.
inline constexpr double kSeed256StepFlops = 22.83e12;
// The first H200 lease's step times (docs/bench/gpu.json history), seed network at 256^3, batch 1.
inline constexpr double kCudaFp32Seed256StepSeconds = 0.469;
inline constexpr double kCudaBf16Seed256StepSeconds = 0.304;
// The 2-core CI machine's CPU benchmark step (results.jsonl train_splitseg: base 16, 64^3, 2 threads).
inline constexpr double kCpuBenchStepFlops = 89.5e9;
inline constexpr double kCpuBenchStepSeconds = 0.732;
// Links: PCIe 4.0 x16 in practice (GPU peers too), ranks over Gloo loopback TCP (ranks benchmark), host copies.
inline constexpr double kPcieBytesPerSecond = 25e9;
inline constexpr double kRankBytesPerSecond = 2e9;
inline constexpr double kHostBytesPerSecond = 10e9;

} // namespace splitseg::planner::calibration
