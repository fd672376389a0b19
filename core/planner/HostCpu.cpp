#include "core/planner/HostCpu.h"
#include "core/base/Error.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace splitseg::planner {

namespace {

// oneDNN reads ONEDNN_MAX_CPU_ISA (or the older DNNL_MAX_CPU_ISA) once; names below avx512_core
// ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2") cap it there, "ALL" and AVX512/AMX names don't.
bool cappedBelowAvx512() {
  const char* v = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!v || !*v) v = std::getenv("DNNL_MAX_CPU_ISA");
  if (!v || !*v) return false;
  std::string isa = v;
  for (char& c : isa) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return isa.rfind("SSE", 0) == 0 || isa.rfind("AVX2", 0) == 0 || isa == "AVX";
}

} // namespace

HostCpu probeHostCpu() {
  HostCpu h;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  h.avx512Core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && !cappedBelowAvx512();
#endif
  return h;
}

std::string toString(CpuLayout layout) {
  switch (layout) {
    case CpuLayout::Auto: return "auto";
    case CpuLayout::Ncdhw: return "ncdhw";
    case CpuLayout::ChannelsLast: return "channels-last";
  }
  return "auto";
}

CpuLayout cpuLayoutFromString(const std::string& text) {
  if (text == "auto") return CpuLayout::Auto;
  if (text == "ncdhw" || text == "contiguous") return CpuLayout::Ncdhw;
  if (text == "channels-last" || text == "channels_last" || text == "ndhwc") return CpuLayout::ChannelsLast;
  throw InvalidArgument("unknown CPU layout '" + text + "' (auto, ncdhw, channels-last)");
}

bool usesChannelsLast(CpuLayout layout, const HostCpu& cpu) {
  return layout == CpuLayout::ChannelsLast || (layout == CpuLayout::Auto && !cpu.avx512Core);
}

const HostCpu& hostCpu() {
  static const HostCpu h = probeHostCpu();
  return h;
}

} // namespace splitseg::planner
