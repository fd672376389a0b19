#pragma once
// Placement: which device runs each stage. The one plan object for device placement; the
// engine's SplitExecutor applies it and nothing else moves model parts between devices.
#include <map>
#include <string>
#include <vector>

namespace splitseg::placement {

class Placement {
public:
  Placement() = default;
  // Every stage on one device.
  static Placement uniform(const std::vector<std::string>& stages, const std::string& device);
  // "enc0=cuda:0,dec0=cpu" (unnamed stages go to defaultDevice), a JSON object text, or the
  // path of a JSON file. Throws InvalidArgument naming the unknown stage or bad entry.
  static Placement parse(const std::string& text, const std::vector<std::string>& stages,
                         const std::string& defaultDevice);
  // {"stages": {"enc0": "cpu", ...}}; all stages must be present.
  static Placement fromJson(const std::string& json, const std::vector<std::string>& stages);
  std::string toJson() const;
  void save(const std::string& path) const;
  static Placement load(const std::string& path, const std::vector<std::string>& stages);

  const std::vector<std::string>& stages() const { return order_; }
  // The device of a stage; for a stage sharded over several devices, the first of them (it holds
  // the stage's parameters; the other shards borrow them for each step).
  const std::string& deviceOf(const std::string& stage) const;
  // The placement entry as written: "cuda:0", or "cuda:0+cuda:1" for a sharded stage.
  const std::string& entryOf(const std::string& stage) const;
  // The devices a stage runs on: one, or its shards in slab order.
  std::vector<std::string> shardsOf(const std::string& stage) const;
  bool isSharded(const std::string& stage) const { return shardsOf(stage).size() > 1; }
  bool anySharded() const;
  // device: one device or shards joined by '+' ("cuda:0+cuda:1").
  void assign(const std::string& stage, const std::string& device);
  // Distinct devices in stage order (every shard's device included).
  std::vector<std::string> devices() const;
  // Ranks the placement names ("r1:cuda:0"): 1 + the highest rank, 0 when it names none (one
  // process). A stage without a rank runs in rank 0's process.
  int rankCount() const;
  int rankOf(const std::string& stage) const;
  // Throws DeviceError when a stage's device is not among `available`.
  void checkDevices(const std::vector<std::string>& available) const;
  std::string describe() const;
  // "enc0=cpu,enc1=cuda:0,..." — what --placement accepts.
  std::string toInline() const;  // "enc0..enc2 cuda:0 | bottleneck..head cpu"

  bool operator==(const Placement& o) const { return order_ == o.order_ && map_ == o.map_; }
  bool operator!=(const Placement& o) const { return !(*this == o); }

private:
  std::vector<std::string> order_;
  std::map<std::string, std::string> map_;      // stage -> entry ("cuda:0" or "cuda:0+cuda:1")
  std::map<std::string, std::string> primary_;  // stage -> first device of its entry
};

// "cuda:0 + cuda:1" -> "cuda:0+cuda:1": each device canonical; a device listed twice, or shards
// that mix this process's devices with ranks' devices, throw InvalidArgument.
std::string canonicalEntry(const std::string& entry);
std::vector<std::string> splitShards(const std::string& entry);

// "cpu", "cuda", "cuda:1" -> canonical "cpu" / "cuda:0" / "cuda:1"; a rank's device "r1:cuda" ->
// "r1:cuda:0". Throws InvalidArgument.
std::string canonicalDevice(const std::string& device);

// A device split into the rank that owns it (-1: this process, no rank named) and the device
// inside that rank's process.
struct RankDevice {
  int rank = -1;
  std::string device;
};
RankDevice splitRank(const std::string& device);
// The rank whose process runs `device`: the rank it names, or 0 for a bare device (the
// workstation's own process is rank 0 when a run has ranks).
int processRank(const std::string& device);

} // namespace splitseg::placement
