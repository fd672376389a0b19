#pragma once
// The time of one training step predicted from a memory plan, so the auto-placer can choose the
// fastest placement that fits instead of the one with the lowest peak. One process runs its
// stages one after another, so the step is the sum over stages of each stage's FLOPs at its
// device's speed (a sharded stage: its largest slab at its slowest device), plus the bytes
// moved between devices and the halos at the link's bandwidth (transfers that overlap compute
// are not modelled: an upper bound).
//
// Stages on two or more ranks (and none sharded) run at the same time under the GPipe schedule
// (PipelineOrder): the step is then the finish time of a replay of that schedule, each
// (stage, micro-batch) cell starting when its rank is free and its inputs (forward) or its
// output's gradients (backward) have arrived, with each cell's share of the stage's FLOPs and
// each crossing tensor's micro-batch share of bytes at the link's bandwidth.
#include "core/planner/MemoryPlanner.h"
#include "core/planner/NetworkStructure.h"

#include <map>
#include <string>
#include <vector>

namespace splitseg::planner {

// Sustained training FLOP/s of a device kind when nothing was measured (Calibration.h says where
// each figure comes from).
double defaultFlopsPerSecond(const DeviceSpec& device, placement::Precision precision);
// The device's measured speed (DeviceSpec::flopsPerSecond) when it has one, else the default.
double flopsPerSecondOf(const DeviceSpec& device, placement::Precision precision);
// Bytes per second between two devices (host<->GPU over PCIe, GPU<->GPU, ranks over loopback, or
// between ranks the slower of their DeviceSpec::rankLinkBytesPerSecond where one is given).
double linkBytesPerSecond(const std::string& from, const std::string& to, const std::vector<DeviceSpec>& devices = {});

struct StepTime {
  double seconds = 0;          // compute + transfers; pipelined: the replayed schedule's finish time
  double computeSeconds = 0;   // pipelined: the busiest rank's compute
  double transferSeconds = 0;  // bytes between devices + halos + host offload
  std::map<std::string, double> busySeconds;  // per device
  int pipelinedRanks = 0;      // ranks working at the same time (0: stages one after another)
};

// `network`: the planned network (the stages' inputs, which the GPipe replay follows).
StepTime predictStepTime(const MemoryPlan& plan, const std::vector<DeviceSpec>& devices,
                         const NetworkStructure& network);

} // namespace splitseg::planner
