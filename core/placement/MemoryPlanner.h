#pragma once
// Predicts the memory of one training step of a split network, per stage and per device,
// before anything runs. It replays the step tensor by tensor — what each layer allocates, what
// autograd saves for backward, when backward frees it, the gradients it creates, the copies
// between devices — so the numbers follow the real network's layers, not a lookup table.
#include "core/placement/HostCpu.h"
#include "core/placement/NetworkStructure.h"
#include "core/placement/Placement.h"
#include "core/placement/Precision.h"
#include "core/placement/ShardLayout.h"

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace splitseg::placement {

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
  // "cuda:0", or a rank's "r1:cuda:0".
  bool isCuda() const {
    const auto colon = name.find(':');
    const bool ranked = name.size() > 1 && name[0] == 'r' && colon != std::string::npos && colon > 1;
    return name.compare(ranked ? colon + 1 : 0, 4, "cuda") == 0;
  }
};

// Costs the tensor replay cannot see. The CPU fields are checked by tests/core/placement against
// peaks measured here. The two CUDA constants are NOT measured: they are only the default for
// devices without a measurement (planning-only GPUs, or a probe that failed). Present CUDA devices
// carry their measured allowance (engine::detectDevices -> DeviceSpec::allowance): context +
// cuDNN workspace from a probe convolution at start-up.
struct PlannerOptions {
  std::int64_t cudaContextBytes = std::int64_t{500} << 20;    // planning-only default: CUDA context + kernels
  std::int64_t cudnnWorkspaceBytes = std::int64_t{256} << 20; // planning-only default: cuDNN conv workspace
  // A CPU process's memory beyond its tensors, so that a CPU device's peak is what its resident
  // memory grows by: LibTorch's code pages a step touches (24-27 MiB in /proc/self/smaps), MKL's
  // per-thread gemm buffers behind the native convolutions, malloc's own heap, and the host
  // cache's fragmentation (the rest of its heap beyond the live tensors; not modelled). Set to the
  // median of resident growth minus the predicted tensor peak over tests/bench's "fit" planner
  // runs (7 runs of 10 steps, 47-106 MiB; 2 threads, NCDHW, AVX-512 AMD EPYC, 2026-12-04). With
  // 1 thread the same runs were 6.7-13.0 MiB lower in every batch-1 configuration and unchanged at
  // batch 2, where no native convolution runs (per-thread MKL buffers; 16 planner configurations,
  // 2026-12-04): likely larger with more threads, not measured beyond two, nor with channels-last.
  std::int64_t cpuAllowanceBytes = std::int64_t{86} << 20;
  // A CUDA convolution's backward holds transient memory beyond its input gradient that grows
  // with the layer (likely cuDNN's workspace for it; the start-up probe measures a small one):
  // this many times the bytes of its input and output. Fitted to the H200's allocator peaks of
  // the 2026-12-04 lease (docs/bench/gpu.json: seed U-Net base 32, 128^3-256^3, fp32 / bf16 /
  // bf16 + recompute): without it the planner was 7-25 % under at those 9 sizes and modes; with
  // 1.0 it is 1-7 % over on all 9 (0.5: 4-12 % under; 1.5: 13-18 % over). Out of sample on the
  // H100 of 2026-12-06: +0.9 to +6.8 % over its 11 rows at 128^3-384^3 (384^3 bf16 +1.1 %,
  // bf16 + recompute +1.3 %); core.LeasePeaksTest holds every lease's rows to it.
  double cudaConvBackwardScratch = 1.0;
  // Its forward holds one too, while its output exists: this many times the bytes of its input
  // and output. Fitted to the H100's allocator peaks of `infer` on the 2026-12-06 lease
  // (docs/bench/gpu.json "inference_memory": base 32, 256^3 whole and 384^3 in 128^3 windows,
  // four a pass, fp32): without it the plan was 27.3 % and 27.2 % under; with 1.0 it is within
  // 0.05 % of both (0.5: 14 % under). Two rows, one network, in-sample; a training step's peak
  // lies in its backward, so the term left the lease's 15 training rows unchanged.
  double cudaConvForwardScratch = 1.0;
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
  // (mirrored in StepSimulator). oneDNN reorders plain NCDHW tensors into blocked layouts: a
  // transient of about this many input+output sizes; the native kernels unfold into column
  // buffers, whose size follows from the layer.
  double cpuOneDnnForwardScratch = 1.0;
  double cpuOneDnnBackwardScratch = 1.0;
  // The planned CPU's oneDNN kernels (HostCpu: this host's, with ONEDNN_MAX_CPU_ISA). AVX-512:
  // fp32 3x3x3 transients of input and output with channels padded to 16 (nCdhw16c) times the
  // factors above (the 1x1x1 and transposed layers have their own), and bf16 convolutions in
  // oneDNN. AVX2: fp32 channels blocked by 8 with transients of their own, bf16 convolutions in
  // LibTorch's native kernels. CpuConvScratch.cpp says what was measured for each.
  bool cpuAvx512 = hostCpu().avx512Core;
  // bf16 convolutions in oneDNN work on channel-blocked layouts: channels are padded up to
  // this block, so layers with few channels (small base, the 1-channel head) cost far more
  // than their tensors. CpuConvScratch.cpp holds the per-kernel model, measured
  // with CpuMemoryCounter on this LibTorch (AVX-512 bf16 CPU).
  int cpuBf16ChannelBlock = 16;
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
  StagePrecisions precision;         // per stage (a default plus overrides)
  std::set<std::string> checkpoint;  // stages run without keeping activations (recomputed)
  // Host offload: checkpointed stages on GPUs keep their saved inputs in pinned host memory
  // between forward and backward (fetched back for their backward, the next one prefetched).
  bool offload = false;
  bool adam = true;                  // Adam keeps two moments per parameter
  // fp32 CPU stages train on channels-last weights (RunSpec::cpuLayout, resolved): their oneDNN
  // convolutions keep activations channels-last and hold other buffers. Runs over ranks and
  // sharded stages keep NCDHW (the engine converts only the Trainer's unsharded stages).
  bool cpuChannelsLast = false;
  Placement placement;               // empty: every stage on devices[0]
  std::vector<DeviceSpec> devices;   // every device the placement names must be listed
  // Sharded stages (placement entries "cuda:0+cuda:1"): the cut axis and optional slab sizes per
  // entry, as engine::SplitExecutor::setSharding takes them.
  ShardAxis shardAxis = ShardAxis::Depth;
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
  Precision precision = Precision::FP32;
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
  Precision precision = Precision::FP32;  // the default; StagePlan::precision per stage
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

} // namespace splitseg::placement
