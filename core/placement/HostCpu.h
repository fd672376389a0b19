#pragma once
// What this machine's CPU offers oneDNN, which decides how LibTorch's CPU convolutions lay out
// their buffers: the planner's CPU defaults (PlannerOptions) follow it, since a rank's `r1:cpu`
// or the local CPU is planned as this host's.
namespace splitseg::placement {

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

} // namespace splitseg::placement
