#include "core/dist/RankPeaks.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <set>

namespace splitseg::dist {

namespace {
std::vector<std::string> meterDevices(const std::vector<torch::Device>& devices) {
  std::set<std::string> names;
  for (const auto& d : devices) names.insert(d.is_cpu() ? "cpu" : d.str());
  return {names.begin(), names.end()};
}
} // namespace

ServeMeter::ServeMeter(int rank, const std::vector<torch::Device>& devices, const std::vector<torch::nn::Module*>& modules)
    : rank_(rank), meter_(meterDevices(devices)) {
  for (const auto* m : modules)
    for (const auto& p : m->parameters())
      if (p.device().is_cpu()) cpuParameters_ += p.numel() * p.element_size();
  meter_.resetPeaks();
  scope_ = std::make_unique<engine::CpuMemoryScope>(meter_.cpu());
}

ServeMeter::~ServeMeter() = default;

DevicePeaks ServeMeter::peaks() const {
  DevicePeaks out;
  const std::string prefix = "r" + std::to_string(rank_) + ":";
  for (const auto& m : meter_.read()) out[prefix + m.device] = m.peak + (m.device == "cpu" ? cpuParameters_ : 0);
  return out;
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
      const auto j = nlohmann::json::parse(std::string(p, p + bytes.numel()));
      const std::string prefix = "r" + std::to_string(r) + ":";
      for (const auto& [device, peak] : j.items())
        if (device.rfind(prefix, 0) == 0 && peak.is_number_integer()) out[device] = peak.get<std::int64_t>();
    } catch (const nlohmann::json::exception&) {
      throw RankError("rank " + std::to_string(r) + " sent malformed memory peaks");
    }
  }
  return out;
}

} // namespace splitseg::dist
