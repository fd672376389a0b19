#include "core/engine/DeviceSpeed.h"
#include "core/base/Error.h"
#include "core/data/SampleSource.h"
#include "core/engine/NetworkFactory.h"
#include "core/engine/Trainer.h"
#include "core/model/NetworkStructureOf.h"
#include "core/planner/MemoryPlanner.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace splitseg::engine {

std::array<std::int64_t, 3> measurementPatch(const std::array<std::int64_t, 3>& planned, std::int64_t divisor,
                                             std::int64_t maxVoxels) {
  if (divisor < 1 || maxVoxels < 1) throw InvalidArgument("speed measurement: bad size divisor or voxel budget");
  double voxels = 1;
  for (auto s : planned) {
    if (s < 1) throw InvalidArgument("speed measurement: the planned patch has a side below 1");
    voxels *= static_cast<double>(s);
  }
  const double scale = voxels > static_cast<double>(maxVoxels) ? std::cbrt(static_cast<double>(maxVoxels) / voxels) : 1.0;
  std::array<std::int64_t, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto side = static_cast<std::int64_t>(std::floor(static_cast<double>(planned[i]) * scale));
    out[i] = std::max(divisor, side / divisor * divisor);
  }
  return out;
}

MeasuredSpeed measureTrainingSpeed(const run::RunSpec& run, const std::string& device,
                                   const std::array<std::int64_t, 3>& patch, int steps) {
  if (steps < 1 || *std::min_element(patch.begin(), patch.end()) < 1)
    throw InvalidArgument("speed measurement: needs at least one step of a non-empty patch");
  run::RunSpec spec = run;
  spec.patch = patch;
  spec.batch = 1;
  spec.microBatches = 1;
  spec.steps = steps + 1;
  spec.epochs = 0;
  spec.validateEvery = 0;
  spec.checkpointEvery = 0;
  spec.data = run::DataSpec{};  // synthetic phantoms of the patch size
  spec.offload = false;
  spec.shardSlabs.clear();
  spec.timeline = false;
  auto network = createNetwork(spec.architecture, spec.networkOptions.dump());
  const auto names = network->stageNames();
  spec.setPlacement(placement::Placement::uniform(names, device));
  const planner::MemoryPlanner planner(model::networkStructure(*network));
  const auto plan = planner.plan(spec.planRequest(names, {planner::DeviceSpec{device, std::int64_t{1} << 50}}));
  MeasuredSpeed m;
  m.patch = spec.patch;
  for (const auto& s : plan.stages) m.stepFlops += s.flops;
  Trainer trainer(network, std::make_shared<data::PhantomSource>(std::max<int>(1, static_cast<int>(network->outChannels()) - 1)), spec);
  trainer.step();  // warm-up: oneDNN's kernels and the allocator's caches
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) seconds.push_back(trainer.step().seconds);
  std::sort(seconds.begin(), seconds.end());
  m.stepSeconds = seconds[seconds.size() / 2];
  if (!(m.stepSeconds > 0) || !(m.stepFlops > 0)) throw Error("speed measurement: no time or no work measured");
  m.flopsPerSecond = m.stepFlops / m.stepSeconds;
  return m;
}

} // namespace splitseg::engine
