#pragma once
// What this machine's CPU offers oneDNN, which decides how LibTorch's CPU convolutions lay out
// their buffers: the planner's CPU defaults (PlannerOptions) follow it, since a rank's `r1:cpu`
// or the local CPU is planned as this host's.
#include <string>

namespace splitseg::planner {

struct HostCpu {
  // oneDNN's avx512_core (AVX-512 F, BW, VL, DQ) and not capped below it by ONEDNN_MAX_CPU_ISA:
  // fp32 convolutions block channels by 16 (by 8 on AVX2), and bf16 convolutions run in oneDNN
  // (ideep::has_bf16_type_support; without it LibTorch's native kernels run them).
  bool avx512Core = true;
};

// Probed once. Off x86-64 it reports the AVX-512 figures the planner was fitted to (untested).
const HostCpu& hostCpu();
// A fresh probe (the environment read now), for tests.
HostCpu probeHostCpu();

// How a run lays out the weights of its fp32 CPU stages while training (RunSpec::cpuLayout).
// Channels-last (NDHWC) weights make oneDNN keep activations in that layout instead of reordering
// them into its blocked layout and back at every convolution; its backward then holds other
// buffers, which the planner models (CpuConvScratch.cpp).
enum class CpuLayout { Auto, Ncdhw, ChannelsLast };
std::string toString(CpuLayout layout);                   // "auto", "ncdhw", "channels-last"
CpuLayout cpuLayoutFromString(const std::string& text);   // throws InvalidArgument
// Auto is channels-last on CPUs without AVX-512, NCDHW on the others: channels-last weights made
// the training step faster on an AVX2-only host and not on AVX-512 ones (tests/bench
// train_splitseg_cl / train_splitseg_other; docs/calibration.md, "CPU layout"). The planner models
// both layouts on both ISAs (CpuConvScratchTest, PlannerMeasuredTest).
bool usesChannelsLast(CpuLayout layout, const HostCpu& cpu = hostCpu());

} // namespace splitseg::planner
