#pragma once
// The time of one training step predicted from a memory plan, so the auto-placer can choose the
// fastest placement that fits instead of the one with the lowest peak. One process runs its
// stages one after another, so the step is the sum over stages of each stage's FLOPs at its
// device's speed (a sharded stage: its largest slab at its slowest device), plus the bytes
// moved between devices and the halos at the link's bandwidth. Ranks' pipelining and transfers
// that overlap compute are not modelled (the prediction is then an upper bound).
#include "core/placement/MemoryPlanner.h"

#include <map>
#include <string>
#include <vector>

namespace splitseg::placement {

// Sustained training FLOP/s of a device kind when nothing was measured; see StepTime.cpp for
// where each figure comes from.
double defaultFlopsPerSecond(const DeviceSpec& device, Precision precision);
// The device's measured speed (DeviceSpec::flopsPerSecond) when it has one, else the default.
double flopsPerSecondOf(const DeviceSpec& device, Precision precision);
// Bytes per second between two devices (host<->GPU over PCIe, GPU<->GPU, ranks over loopback).
double linkBytesPerSecond(const std::string& from, const std::string& to);

struct StepTime {
  double seconds = 0;          // compute + transfers
  double computeSeconds = 0;
  double transferSeconds = 0;  // bytes between devices + halos + host offload
  std::map<std::string, double> busySeconds;  // per device
};

StepTime predictStepTime(const MemoryPlan& plan, const std::vector<DeviceSpec>& devices);

} // namespace splitseg::placement
