#include "core/ranks/RankPeaks.h"
#include "core/base/JsonReader.h"
#include "core/base/JsonText.h"
#include "core/base/Error.h"
#include "core/base/Units.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cctype>
#include <cstdlib>
#include <set>

namespace splitseg::ranks {

PeakMeter::PeakMeter(int rank, const std::vector<torch::nn::Module*>& modules, std::int64_t cpuBudget)
    : rank_(rank) {
  std::set<std::string> devices{"cpu"};
  for (const auto* m : modules)
    for (const auto& p : m->parameters()) {
      if (p.device().is_cpu()) cpuParameters_ += p.numel() * p.element_size();
      else devices.insert(p.device().str());
    }
  meter_ = std::make_unique<engine::MemoryMeter>(std::vector<std::string>(devices.begin(), devices.end()));
  meter_->resetPeaks();
  meter_->cpu().setBudget(cpuBudget);
  // The weights existed before the counter started: counted as held from the start, so that its
  // peak and its budget are the planner's figure (an allocation refused names the whole).
  hold(cpuParameters_);
  scope_ = std::make_unique<engine::CpuMemoryScope>(meter_->cpu());
}

void PeakMeter::holdOnCpu(std::int64_t bytes) {
  heldOnCpu_ += bytes;
  hold(bytes);
}

void PeakMeter::hold(std::int64_t bytes) {
  if (meter_->cpu().record(bytes)) return;
  throw OutOfMemoryError((rank_ >= 0 ? "r" + std::to_string(rank_) + ":" : "") + "cpu", "input",
                         "the weights (" + formatBytes(double(cpuParameters_)) + ") and the image (" +
                             formatBytes(double(heldOnCpu_)) + ") alone take more than the CPU budget of " +
                             formatBytes(double(meter_->cpu().budget())));
}

PeakMeter::~PeakMeter() = default;

DevicePeaks PeakMeter::peaks() const {
  DevicePeaks out;
  const std::string prefix = rank_ >= 0 ? "r" + std::to_string(rank_) + ":" : "";
  for (const auto& m : meter_->read()) out[prefix + m.device] = m.peak;  // the CPU's with what it holds
  return out;
}

LocalStages localStages(model::StagedNetwork& network, const placement::Placement& placement, bool distributed) {
  LocalStages out;
  const auto names = network.stageNames();
  for (std::size_t i = 0; i < names.size(); ++i) {
    bool mine = !distributed;
    for (const auto& shard : placement.shardsOf(names[i])) {
      mine = mine || placement::processRank(shard) == 0;
      if (distributed && placement::splitRank(shard).rank == 0) out.namedRank = 0;
    }
    if (mine) out.modules.push_back(network.stageModule(i).get());
  }
  return out;
}

Volume predictLabelsMeasured(engine::Inferer& inferer, const LocalStages& local, const Volume& source,
                             const Preprocessing& preprocessing, const engine::InferOptions& options,
                             std::int64_t cpuBudget, DevicePeaks& peaks, ProgressSink* progress, CancelToken* cancel) {
  PeakMeter meter(local.namedRank, local.modules, cpuBudget);
  meter.holdOnCpu(engine::predictLabelsImageBytes(source, preprocessing));
  Volume labels = engine::predictLabels(inferer, source, preprocessing, options, progress, cancel);
  peaks = meter.peaks();
  return labels;
}

void rethrowOutOfMemory(const c10::OutOfMemoryError& e, int rank, const torch::Device& device, const std::string& stage) {
  const std::string what = e.what_without_backtrace();
  std::string where = "cpu";
  if (what.find("CUDA") != std::string::npos) {
    // "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of ..."
    const auto gpu = what.find("GPU ");
    where = device.is_cuda() ? device.str()
            : gpu != std::string::npos && gpu + 4 < what.size() && std::isdigit(static_cast<unsigned char>(what[gpu + 4]))
                ? "cuda:" + std::to_string(std::atoi(what.c_str() + gpu + 4))
                : "cuda";
  }
  throw OutOfMemoryError("r" + std::to_string(rank) + ":" + where, stage, (where == "cpu" ? "" : "CUDA allocator: ") + what);
}

void rethrowOutOfMemory(const c10::OutOfMemoryError& e, int rank, const std::string& stage) {
  rethrowOutOfMemory(e, rank, torch::Device(torch::kCPU), stage);
}

void sendPeaks(Comm& comm, const DevicePeaks& peaks, int tag) {
  const std::string text = nlohmann::json(peaks).dump();
  auto bytes = torch::empty({static_cast<std::int64_t>(text.size())}, torch::kUInt8);
  std::copy(text.begin(), text.end(), bytes.data_ptr<std::uint8_t>());
  comm.send(bytes, 0, tag, "this rank's memory peaks");
  comm.flush();
}

DevicePeaks receivePeaks(Comm& comm, int tag) {
  DevicePeaks out;
  for (int r = 1; r < comm.size(); ++r) {
    const auto bytes = comm.recv(r, tag, "the rank's memory peaks").contiguous();
    const auto* p = bytes.data_ptr<std::uint8_t>();
    try {
      const auto j = parseJson(std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(bytes.numel())),
                               "rank " + std::to_string(r) + "'s memory peaks", kRankMessageLimits);
      const std::string prefix = "r" + std::to_string(r) + ":";
      for (const auto& [device, peak] : JsonField(j, "peaks").entries())
        if (device.rfind(prefix, 0) == 0) out[device] = peak.as<std::int64_t>();
    } catch (const JsonFieldError& e) {
      throw RankError("rank " + std::to_string(r) + " sent malformed memory peaks (" + e.what() + ")");
    }
  }
  return out;
}

} // namespace splitseg::ranks
