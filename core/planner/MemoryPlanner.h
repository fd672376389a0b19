#pragma once
// Predicts the memory of one training step of a split network, per stage and per device,
// before anything runs. It replays the step tensor by tensor — what each layer allocates, what
// autograd saves for backward, when backward frees it, the gradients it creates, the copies
// between devices — so the numbers follow the real network's layers, not a lookup table.
#include "core/planner/Calibration.h"
#include "core/planner/HostCpu.h"
#include "core/planner/NetworkStructure.h"
#include "core/placement/Placement.h"
#include "core/placement/Precision.h"
#include "core/placement/ShardLayout.h"

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace splitseg::planner {

struct DeviceSpec {
  std::string name;             // "cpu", "cuda:0"
  std::int64_t capacity = 0;    // bytes usable for the run (0: unknown, never fits)
  std::int64_t allowance = -1;  // fixed cost outside tensors (measured on present GPUs); -1: PlannerOptions default
  bool planningOnly = false;    // given by the user for what-if planning
  // Training speed in FLOP/s of the planner's count, measured on this device (engine/DeviceSpeed);
  // 0: the default for its kind (StepTime.cpp).
  double flopsPerSecond = 0;
  // A CPU device: the intra-op threads of the process that runs it (ATen sends a 1x1x1
  // convolution at batch < 16 to oneDNN only with more than one); 0: PlannerOptions::cpuThreads.
  // Ranks started on one host share its cores (engine::rankThreads).
  int cpuThreads = 0;
  // Bytes per second between this device's rank and the other ranks (its host's link, declared or
  // measured); 0: the calibrated loopback figure (Calibration.h kRankBytesPerSecond).
  double rankLinkBytesPerSecond = 0;
  // "cuda:0", or a rank's "r1:cuda:0".
  bool isCuda() const {
    const auto colon = name.find(':');
    const bool ranked = name.size() > 1 && name[0] == 'r' && colon != std::string::npos && colon > 1;
    return name.compare(ranked ? colon + 1 : 0, 4, "cuda") == 0;
  }
};

// Costs the tensor replay cannot see. The defaults are calibration::'s (Calibration.h; where each
// was measured: docs/calibration.md). The CPU fields are checked by tests/core/planner against
// peaks measured here. The two CUDA allowances are NOT measured: they are only the default for
// devices without a measurement (planning-only GPUs, or a probe that failed). Present CUDA devices
// carry their measured allowance (engine::detectDevices -> DeviceSpec::allowance): context +
// cuDNN workspace from a probe convolution at start-up.
struct PlannerOptions {
  std::int64_t cudaContextBytes = calibration::kCudaContextBytes;        // planning-only default: CUDA context + kernels
  std::int64_t cudnnWorkspaceBytes = calibration::kCudnnWorkspaceBytes;  // planning-only default: cuDNN conv workspace
  // A CPU process's memory beyond its tensors, so that a CPU device's peak is what its resident
  // memory grows by: LibTorch's code pages a step touches, MKL's per-thread gemm buffers behind
  // the native convolutions, malloc's own heap, and the host cache's fragmentation (not modelled).
  // Likely larger with more threads; measured at one and two.
  std::int64_t cpuAllowanceBytes = calibration::kCpuAllowanceBytes;
  // A CUDA convolution's backward holds transient memory beyond its input gradient that grows
  // with the layer (likely cuDNN's workspace for it; the start-up probe measures a small one):
  // this many times the bytes of its input and output. core.LeasePeaksTest holds every lease's
  // rows to it.
  double cudaConvBackwardScratch = calibration::kCudaConvBackwardScratch;
  // Its forward holds one too, while its output exists: this many times the bytes of its input
  // and output. A training step's peak lies in its backward, so this term barely moves it.
  double cudaConvForwardScratch = calibration::kCudaConvForwardScratch;
  // The Trainer zeroes gradients with set_to_none, so a stage's weight gradients exist from its
  // backward to the optimizer step, not during forward.
  bool gradientsPersist = false;
  // Logit-sized fp32 tensors of engine::segmentationLoss: kept for backward (probabilities and
  // the float target), alive at once while it runs (BCE temporaries; the int64 label map of
  // the Dice metric counts two) and while its backward runs.
  int lossSavedTensors = 2;
  int lossForwardTensors = 3;
  int lossBackwardTensors = 3;
  // CPU convolutions: ATen picks oneDNN or its native im2col kernels by a size heuristic
  // (mirrored in CpuConvScratch.cpp). oneDNN reorders plain NCDHW tensors into blocked layouts: a
  // transient of about this many input+output sizes; the native kernels unfold into column
  // buffers, whose size follows from the layer.
  double cpuOneDnnForwardScratch = calibration::kCpuOneDnnForwardScratch;
  double cpuOneDnnBackwardScratch = calibration::kCpuOneDnnBackwardScratch;
  // The planned CPU's oneDNN kernels (HostCpu: this host's, with ONEDNN_MAX_CPU_ISA). AVX-512:
  // fp32 3x3x3 transients of input and output with channels padded to 16 (nCdhw16c) times the
  // factors above (the 1x1x1 and transposed layers have their own), and bf16 convolutions in
  // oneDNN. AVX2: fp32 channels blocked by 8 with transients of their own, bf16 convolutions in
  // LibTorch's native kernels.
  bool cpuAvx512 = hostCpu().avx512Core;
  // bf16 convolutions in oneDNN work on channel-blocked layouts: channels are padded up to
  // this block, so layers with few channels (small base, the 1-channel head) cost far more
  // than their tensors (CpuConvScratch.cpp's per-kernel model).
  int cpuBf16ChannelBlock = calibration::kCpuBf16ChannelBlock;
  int cpuThreads = 2;            // ATen's heuristic differs for one thread (DeviceSpec::cpuThreads overrides)
};

struct PlanRequest {
  std::array<std::int64_t, 3> size{128, 128, 128};  // D, H, W of the network input
  int batch = 1;
  // Inference (engine::Inferer::predict) instead of a training step: `volume` is the image's D, H,
  // W, `size` the window (zeros: the whole volume in one pass), `batch` the windows per pass and
  // `overlap` theirs. Checkpointing, the optimizer and offload do not apply. Over ranks, a pass's
  // `microBatches` are planned one at a time on each device beside the other micro-batches' sends
  // still in flight (RankMemoryTest and DistTrainingTest measure each rank's peak).
  bool inference = false;
  std::array<std::int64_t, 3> volume{0, 0, 0};
  double overlap = 0.5;
  bool mirror = false;  // inference: test-time mirroring (engine::InferOptions::mirror, any axis)
  // Ranks' GPipe schedule: the batch flows as this many micro-batches; every device holds the
  // saved activations of all of them when the first backward begins.
  int microBatches = 1;
  placement::StagePrecisions precision;         // per stage (a default plus overrides)
  std::set<std::string> checkpoint;  // stages run without keeping activations (recomputed)
  // Host offload: checkpointed stages on GPUs keep their saved inputs in pinned host memory
  // between forward and backward (fetched back for their backward, the next one prefetched).
  bool offload = false;
  bool adam = true;                  // Adam keeps two moments per parameter
  // fp32 CPU stages train on channels-last weights (RunSpec::cpuLayout, resolved): their oneDNN
  // convolutions keep activations channels-last and hold other buffers. Runs over ranks and
  // sharded stages keep NCDHW (the engine converts only the Trainer's unsharded stages).
  bool cpuChannelsLast = false;
  placement::Placement placement;               // empty: every stage on devices[0]
  std::vector<DeviceSpec> devices;   // every device the placement names must be listed
  // Sharded stages (placement entries "cuda:0+cuda:1"): the cut axis and optional slab sizes per
  // entry, as engine::SplitExecutor::setSharding takes them.
  placement::ShardAxis shardAxis = placement::ShardAxis::Depth;
  std::map<std::string, std::vector<std::int64_t>> shardSlabs;
};

struct StagePlan {
  std::string name;
  std::string device;
  std::int64_t parameters = 0;       // count
  std::int64_t parameterBytes = 0;
  std::int64_t gradientBytes = 0;
  std::int64_t optimizerBytes = 0;
  std::int64_t activationBytes = 0;  // saved for backward at the end of forward (inputs copied in excluded)
  std::int64_t transferBytes = 0;    // inputs copied in from other devices (forward)
  std::int64_t outputBytes = 0;
  std::int64_t offloadBytes = 0;     // its saved inputs held in host memory (host offload)
  std::int64_t backwardPeak = 0;     // device memory at the peak of this stage's backward
  std::int64_t backwardTransient = 0;  // that peak above the memory held when its backward began
  double flops = 0;                  // forward + backward (+ recompute when checkpointed)
  bool checkpointed = false;
  placement::Precision precision = placement::Precision::FP32;
};

struct DevicePlan {
  std::string name;
  std::int64_t capacity = 0;
  std::int64_t allowance = 0;
  std::int64_t persistentBytes = 0;   // parameters + optimizer state (+ gradients when persistent)
  std::int64_t activationBytes = 0;   // sum over its stages
  std::int64_t transferBytes = 0;
  std::int64_t offloadBytes = 0;      // host memory holding its stages' offloaded inputs
  std::int64_t peak = 0;              // allowance + peak of tensors over the step
  std::string peakStage;              // stage running when the peak happens
  std::string peakPhase;              // "forward", "backward", "loss", "optimizer"
  double flops = 0;
  std::vector<std::string> stages;
  bool fits() const { return capacity > 0 && peak <= capacity; }
  std::int64_t margin() const { return capacity - peak; }  // negative: short by this much
};

struct MemoryPlan {
  bool inference = false;
  std::array<std::int64_t, 3> size{};  // inference: the window (or the padded whole volume)
  std::array<std::int64_t, 3> volume{};  // inference: the image
  std::int64_t windows = 0;              // inference: windows the volume is cut into
  // Inference: the Inferer's own host memory at its peak (image, accumulators, a pass's windows,
  // logits, probabilities and labels), beyond the network's tensors. Also in the host CPU's peak
  // when a stage runs there ("cpu", or "r0:cpu" over ranks).
  std::int64_t hostBytes = 0;
  int batch = 1;
  int microBatches = 1;
  placement::Precision precision = placement::Precision::FP32;  // the default; StagePlan::precision per stage
  std::string precisionText;              // StagePrecisions text ("fp32", "bf16:enc0,dec0")
  std::vector<StagePlan> stages;
  std::vector<DevicePlan> devices;   // devices that run at least one stage
  std::int64_t bytesMoved = 0;       // between devices, forward activations + backward gradients
  std::int64_t offloadBytes = 0;     // host offload: pinned host memory held (copied out and back each step)
  std::int64_t haloBytes = 0;        // sharded stages: halo planes exchanged per step (forward + backward)
  std::map<std::string, std::vector<std::int64_t>> slabs;  // sharded entries: slab planes at full resolution
  bool fits = false;
  std::string limitingDevice;        // smallest margin
  std::string limitingStage;         // stage at that device's peak
  std::int64_t maxPeak() const;
  double maxDeviceFlops() const;
  std::string toJson() const;        // stable field names for the GUI and --json
};

class MemoryPlanner {
public:
  explicit MemoryPlanner(NetworkStructure network, PlannerOptions options = {});
  MemoryPlan plan(const PlanRequest& request) const;

  const NetworkStructure& network() const { return network_; }
  const PlannerOptions& options() const { return options_; }
  std::int64_t allowanceFor(const DeviceSpec& d) const;

private:
  NetworkStructure network_;
  PlannerOptions options_;
};

} // namespace splitseg::planner
