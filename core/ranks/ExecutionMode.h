#pragma once
// How a run is carried out: in this process, as a pipeline over ranks (each stage on one rank), or
// with every stage sharded over the ranks (each rank the whole network on its slab). The one place
// that decides it, from the run's placement and the number of ranks.
#include "core/placement/Placement.h"
#include "core/run/RunSpec.h"

#include <string>
#include <vector>

namespace splitseg::ranks {

enum class ExecutionMode { OneProcess, Pipeline, Sharded };

// worldSize 1: OneProcess. Otherwise Sharded when every stage is placed on the same ranks' devices,
// each of the worldSize ranks once; else Pipeline.
ExecutionMode executionModeOf(const placement::Placement& placement, int worldSize);
// The same for a run's placement (stages the placement leaves out run on the CPU).
ExecutionMode executionModeOf(const run::RunSpec& spec, const std::vector<std::string>& stages, int worldSize);
std::string toString(ExecutionMode mode);  // "one process", "pipeline over ranks", "every stage sharded"

} // namespace splitseg::ranks
