#include "tests/support/GpuOomChecks.h"

#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/Inferer.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/OptimizerStep.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"

#include <torch/torch.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define SPLITSEG_OOM_CHECK_CUDA 1
#endif

#include <cmath>
#include <functional>
#include <optional>

namespace splitseg::checks {

namespace {
// At most `bytes` through CUDA's caching allocator on `device` while alive (setMemoryFraction of
// the device's total, after the cache is emptied so that reserved is what tensors hold).
class CudaCap {
public:
  CudaCap(const torch::Device& device, std::int64_t bytes) : index_(device.index()) {
#ifdef SPLITSEG_OOM_CHECK_CUDA
    c10::cuda::CUDACachingAllocator::emptyCache();
    const auto total = engine::cudaMemory(device.str()).total;
    c10::cuda::CUDACachingAllocator::setMemoryFraction(std::min(1.0, double(bytes) / double(total)), index_);
#else
    (void)bytes;
#endif
  }
  ~CudaCap() {
#ifdef SPLITSEG_OOM_CHECK_CUDA
    c10::cuda::CUDACachingAllocator::setMemoryFraction(1.0, index_);
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  }
  CudaCap(const CudaCap&) = delete;
  CudaCap& operator=(const CudaCap&) = delete;

private:
  c10::DeviceIndex index_;
};

std::shared_ptr<model::StagedNetwork> network() {
  torch::manual_seed(7);
  return model::UNet3d(model::UNet3dOptions().base_channels(8).depth(4).norm(model::Norm::None)).ptr();
}

// Weights and both Adam moments, copied to the CPU.
std::vector<torch::Tensor> snapshot(engine::Trainer& t, model::StagedNetwork& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.root().parameters()) {
    out.push_back(p.detach().cpu().clone());
    const auto& st = static_cast<const torch::optim::AdamParamState&>(*t.optimizer().state().at(p.unsafeGetTensorImpl()));
    out.push_back(st.exp_avg().cpu().clone());
    out.push_back(st.exp_avg_sq().cpu().clone());
  }
  return out;
}

std::int64_t peakOn(const std::vector<engine::DeviceMemory>& memory, const std::string& device) {
  for (const auto& m : memory)
    if (m.device == device) return m.peak;
  return 0;
}

// Runs `work`, expecting an OutOfMemoryError on `device`; records its message. Empty: as expected.
std::string expectOutOfMemory(const std::function<void()>& work, const std::string& device, nlohmann::json& figure) {
  try {
    work();
  } catch (const OutOfMemoryError& e) {
    figure["error"] = e.what();
    return e.device() == device ? "" : "out of memory named " + e.device() + ", not " + device;
  } catch (const std::exception& e) {
    figure["error"] = e.what();
    return std::string("another error than out of memory: ") + e.what();
  }
  return "ran although capped";
}
} // namespace

CheckResult outOfMemoryRecovers(const std::string& device, int edge) {
  CheckResult r{"out_of_memory_recovers"};
  const torch::Device dev(device);
  const bool cuda = dev.is_cuda();
#ifndef SPLITSEG_OOM_CHECK_CUDA
  if (cuda) {
    r.status = CheckResult::Status::Skip;
    r.detail = "built without CUDA's caching allocator headers";
    return r;
  }
#endif
  auto fail = [&r](const std::string& why) {
    r.status = CheckResult::Status::Fail;
    r.detail += (r.detail.empty() ? "" : "; ") + why;
  };

  // Training: one step to create the gradients, then a step capped halfway between what is held
  // and the step's peak, then the same step uncapped.
  {
    auto net = network();
    run::RunSpec spec;
    spec.patch = {edge, edge, edge};
    spec.batch = 2;
    spec.seed = 5;
    spec.steps = 10;
    spec.setPlacement(placement::Placement::uniform(net->stageNames(), device));
    engine::Trainer trainer(net, std::make_shared<data::PhantomSource>(), spec);
    const auto first = trainer.step();
    const std::int64_t peak = peakOn(first.memory, device);
    const std::int64_t held = cuda ? engine::cudaMemory(device).allocated : trainer.meter().cpu().held();
    const std::int64_t cap = cuda ? held + (peak - held) / 2 : held + peak / 2;
    auto& f = r.figures["training"];
    f = {{"edge", edge}, {"peak", peak}, {"held", held}, {"cap", cap}};
    if (peak <= 0 || (cuda && peak <= held)) fail("training: no step peak measured");
    const auto before = snapshot(trainer, *net);
    {
      std::optional<CudaCap> capped;
      if (cuda) capped.emplace(dev, cap);
      else trainer.setCpuBudget(cap);
      const std::string why = expectOutOfMemory([&] { trainer.step(); }, device, f);
      if (!why.empty()) fail("training: " + why);
    }
    trainer.setCpuBudget(0);
    if (trainer.stepsDone() != 1) fail("training: the refused step was counted");
    if (!allEqual(snapshot(trainer, *net), before)) fail("training: weights or Adam's moments changed by the refused step");
    const auto after = trainer.step();
    f["loss_after"] = after.loss;
    if (!std::isfinite(after.loss) || trainer.stepsDone() != 2) fail("training: no step after the cap was lifted");
  }

  // Inference: a whole volume, capped halfway between what exists before it and its peak.
  {
    auto net = network();
    engine::SplitExecutor executor(net, placement::Placement::uniform(net->stageNames(), device));
    engine::Inferer inferer(executor);
    torch::manual_seed(9);
    const auto image = torch::randn({1, 2 * edge, 2 * edge, 2 * edge});
    torch::NoGradGuard noGrad;
    engine::CpuMemoryCounter counter;
    std::int64_t peak = 0, before = 0;
    torch::Tensor reference;
    {
      engine::CpuMemoryScope scope(counter);
      inferer.predict(image, {});  // warm-up
      if (cuda) {
        engine::cudaResetPeak(device);
        before = engine::cudaMemory(device).allocated;
      }
      counter.resetPeak();
      reference = inferer.predict(image, {}).labels;
      peak = cuda ? engine::cudaMemory(device).peak : counter.peak();
    }
    const std::int64_t cap = before + (peak - before) / 2;
    auto& f = r.figures["inference"];
    f = {{"volume", 2 * edge}, {"peak", peak}, {"before", before}, {"cap", cap}};
    if (peak <= before) fail("inference: no peak measured");
    {
      std::optional<CudaCap> capped;
      engine::CpuMemoryCounter budget;
      if (cuda) capped.emplace(dev, cap);
      else budget.setBudget(cap);
      engine::CpuMemoryScope scope(budget);
      const std::string why = expectOutOfMemory([&] { inferer.predict(image, {}); }, device, f);
      if (!why.empty()) fail("inference: " + why);
    }
    if (!torch::equal(inferer.predict(image, {}).labels, reference)) fail("inference: other labels after the cap was lifted");
  }
  return r;
}

} // namespace splitseg::checks
