// splitseg-cli plan: the memory planner from the command line — per-stage and per-device
// tables, a verdict, auto-placement and the largest cube that fits.
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/base/Units.h"
#include "core/engine/DeviceSpeed.h"
#include "core/engine/Devices.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/PlannerDevices.h"
#include "core/model/NetworkStructureOf.h"
#include "core/model/UNet3d.h"
#include "core/planner/AutoPlacer.h"
#include "core/planner/LargestVolume.h"
#include "core/planner/MemoryPlanner.h"
#include "core/planner/StepTime.h"
#include "core/run/RunSpec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

namespace splitseg::cli {

namespace {

using namespace splitseg::placement;
using namespace splitseg::planner;

struct PlanArgs {
  std::string size = "128";
  int batch = 1;
  int microBatches = 1;
  std::int64_t base = 32;
  int depth = 5;
  std::int64_t inChannels = 1;
  std::int64_t outChannels = 1;
  std::string norm = model::toString(model::UNet3dOptions{}.norm());  // the U-Net's default
  std::string precision = "fp32";
  std::string devices;
  std::string placement;
  bool autoPlace = false;
  bool measureSpeed = false;
  std::string checkpoint;
  std::string allowance;
  std::string optimizer = "adam";
  std::string shardAxis = "depth";
  bool json = false;
  bool largest = false;
  bool offload = false;
  std::string cpuLayout = "auto";
  double rankLinkGbps = 0;  // --rank-link-gbps: the link between ranks; 0: the calibrated loopback figure
  double cpuSpeed = 0;      // --cpu-speed: FLOP/s of every CPU device (a figure --measure-speed printed)
  // --inference: a prediction of an image of `volume` voxels in `window`s, `perPass` at a time.
  bool inference = false;
  std::string volume;
  std::string window = "0";
  double overlap = 0.5;
  int perPass = 1;
  std::string mirror = "none";
};

std::vector<std::string> splitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// --patch X,Y,Z as everywhere else; the old spelling --size DxHxW (depth first) still reads.
std::array<std::int64_t, 3> parsePatchXyz(const std::string& s) {
  const auto parts = splitList(s, 'x');
  if (parts.size() == 3) {
    try {
      return {std::stoll(parts[2]), std::stoll(parts[1]), std::stoll(parts[0])};
    } catch (const std::exception&) {
    }
    throw InvalidArgument("--patch must be N or X,Y,Z, got '" + s + "'");
  }
  return run::parseSize(s);
}

// "cuda:0=16GiB,cuda:1=16GiB" are planning-only; without it, the devices present.
std::vector<DeviceSpec> parseDevices(const std::string& text) {
  std::vector<DeviceSpec> out;
  if (text.empty()) return engine::plannerDevices();
  for (const auto& item : splitList(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw InvalidArgument("device '" + item + "' must be name=capacity (cuda:0=16GiB)");
    out.push_back({canonicalDevice(item.substr(0, eq)), parseBytes(item.substr(eq + 1)), -1, true});
  }
  return out;
}

std::string fmt(std::int64_t b) { return formatBytes(static_cast<double>(b)); }

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string cube(const std::array<std::int64_t, 3>& s) {
  if (s[0] == s[1] && s[1] == s[2]) return std::to_string(s[0]) + "^3";
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
}

void printPlan(const MemoryPlan& p, std::ostream& os) {
  char line[512];
  std::snprintf(line, sizeof line, "%-11s %-13s %-4s %11s %11s %11s %11s %11s %11s %9s\n", "stage", "device",
                "prec", "params", "w+g+opt", "activations", "transfers", "bwd peak", "bwd extra", "TFLOP");
  os << line;
  for (const auto& s : p.stages) {
    std::snprintf(line, sizeof line, "%-11s %-13s %-4s %11lld %11s %11s %11s %11s %11s %9.2f\n",
                  (s.name + (s.checkpointed ? "*" : "")).c_str(), s.device.c_str(), toString(s.precision).c_str(),
                  static_cast<long long>(s.parameters),
                  fmt(s.parameterBytes + s.gradientBytes + s.optimizerBytes).c_str(),
                  fmt(s.activationBytes).c_str(), fmt(s.transferBytes).c_str(), fmt(s.backwardPeak).c_str(),
                  fmt(s.backwardTransient).c_str(), s.flops / 1e12);
    os << line;
  }
  os << "(* checkpointed; activations = saved for backward at the end of forward; bwd peak = device "
        "memory at the peak of the stage's backward, allowance included)\n\n";
  std::snprintf(line, sizeof line, "%-7s %11s %10s %11s %11s %11s %11s %-22s %12s\n", "device", "capacity",
                "allowance", "persistent", "activations", "transfers", "peak", "peak at", "margin");
  os << line;
  for (const auto& d : p.devices) {
    std::snprintf(line, sizeof line, "%-7s %11s %10s %11s %11s %11s %11s %-22s %12s\n", d.name.c_str(),
                  d.capacity > 0 ? fmt(d.capacity).c_str() : "?", fmt(d.allowance).c_str(),
                  fmt(d.persistentBytes).c_str(), fmt(d.activationBytes).c_str(), fmt(d.transferBytes).c_str(),
                  fmt(d.peak).c_str(), (d.peakStage + " " + d.peakPhase).c_str(),
                  ((d.margin() < 0 ? "-" : "+") + fmt(std::llabs(d.margin()))).c_str());
    os << line;
  }
  os << "moved between devices per step: " << fmt(p.bytesMoved) << "\n";
  for (const auto& [entry, sizes] : p.slabs) {
    os << "slabs of " << entry << ":";
    for (const auto n : sizes) os << " " << n;
    os << " planes\n";
  }
  if (p.haloBytes > 0) os << "halo exchanged per step: " << fmt(p.haloBytes) << "\n";
  if (p.offloadBytes > 0)
    os << "host offload: " << fmt(p.offloadBytes) << " of pinned host memory, copied out and back each step\n";
}

std::string verdict(const MemoryPlan& p) {
  std::int64_t worst = worstMargin(p);
  if (p.fits)
    return "FITS: tightest device " + p.limitingDevice + " has " + fmt(worst) + " to spare (peak at " +
           p.limitingStage + ")";
  return "DOES NOT FIT: " + p.limitingDevice + " is short by " + fmt(-worst) + " (peak during stage " +
         p.limitingStage + ")";
}

// Inference: one table of devices (parameters, the pass's peak), the Inferer's host buffers, a
// verdict, and with --largest the largest cubic window that fits.
void runInferencePlan(const PlanArgs& a, const MemoryPlanner& planner, const PlanRequest& req) {
  const MemoryPlan plan = planner.plan(req);
  nlohmann::ordered_json out;
  out["plan"] = nlohmann::json::parse(plan.toJson());
  std::ostream& os = std::cout;
  if (!a.json) {
    char line[320];
    const std::string mirrored = req.mirror ? ", mirrored (" + a.mirror + ")" : "";
    std::snprintf(line, sizeof line, "inference of %s voxels (D, H, W) %s, %d window(s) per pass%s, %s\n",
                  cube(plan.volume).c_str(),
                  a.window == "0" ? ("in one pass (input " + cube(plan.size) + ")").c_str()
                                  : ("in " + cube(plan.size) + " windows, overlap " + std::to_string(a.overlap).substr(0, 4) +
                                     ": " + std::to_string(plan.windows) + " windows").c_str(),
                  plan.batch, mirrored.c_str(), req.precision.toString(planner.network().stageNames()).c_str());
    os << line << "placement: " << req.placement.describe() << "\n\n";
    std::snprintf(line, sizeof line, "%-9s %11s %10s %11s %11s %-16s %12s\n", "device", "capacity", "allowance",
                  "parameters", "peak", "peak at", "margin");
    os << line;
    for (const auto& d : plan.devices) {
      std::snprintf(line, sizeof line, "%-9s %11s %10s %11s %11s %-16s %12s\n", d.name.c_str(),
                    d.capacity > 0 ? fmt(d.capacity).c_str() : "?", fmt(d.allowance).c_str(),
                    fmt(d.persistentBytes).c_str(), fmt(d.peak).c_str(), d.peakStage.c_str(),
                    ((d.margin() < 0 ? "-" : "+") + fmt(std::llabs(d.margin()))).c_str());
      os << line;
    }
    os << "host buffers (image, sums, a pass's windows, probabilities, labels): " << fmt(plan.hostBytes)
       << (std::any_of(plan.devices.begin(), plan.devices.end(), [](const DevicePlan& d) { return d.name == "cpu" || d.name == "r0:cpu"; })
               ? ", in the cpu row's peak\n" : ", in host memory beside the devices\n");
    os << "\n" << verdict(plan) << "\n";
  }
  if (a.largest) {
    const LargestVolume lv = largestWindow(planner, req);
    out["largest_window"] = {{"edge", lv.edge}, {"step", lv.step}, {"limiting_device", lv.next.limitingDevice},
                             {"limiting_stage", lv.next.limitingStage}};
    if (!a.json) {
      os << "\nLargest cubic window for this placement: ";
      if (lv.edge == 0) os << "none fits (not even " << lv.step << "^3)\n";
      else os << cube(lv.plan.size) << " (peak " << fmt(lv.plan.maxPeak()) << ", " << lv.plan.windows << " windows)\n";
      if (!lv.next.devices.empty()) os << "  next size " << cube(lv.next.size) << ": " << verdict(lv.next) << "\n";
    }
  }
  if (a.json) os << out.dump(2) << "\n";
}

// The run this plan is for (one vocabulary with train) and the devices it is planned on.
run::RunSpec planSpec(const PlanArgs& a, const model::UNet3dOptions& o, const std::vector<std::string>& names,
                      std::vector<DeviceSpec>& devices) {
  run::RunSpec spec;
  spec.patch = parsePatchXyz(a.size);
  // An inference pass's batch is its windows (inferencePlanRequest takes them): micro-batches over
  // ranks are checked against them, not against the training batch.
  spec.batch = a.inference ? std::max(a.batch, a.perPass) : a.batch;
  spec.microBatches = a.microBatches;
  spec.precision = StagePrecisions::parse(a.precision, names);
  spec.recompute = run::parseStageList(a.checkpoint, names);
  spec.offload = a.offload;
  spec.cpuLayout = planner::cpuLayoutFromString(a.cpuLayout);
  if (a.optimizer != "adam" && a.optimizer != "sgd") throw InvalidArgument("--optimizer must be adam or sgd");
  devices = parseDevices(a.devices);
  if (devices.empty()) throw DeviceError("no devices to plan for");
  if (!a.allowance.empty())
    for (auto& d : devices) d.allowance = parseBytes(a.allowance);
  spec.setPlacement(Placement::parse(a.placement, names, devices.front().name));
  // A placement over ranks without --devices: the ranks' devices, each taken to be like this host's.
  if (a.devices.empty() && !a.placement.empty()) {
    devices = engine::plannerDevices(spec.resolvePlacement(names, devices.front().name));
    engine::setRankThreads(devices, spec.resolvePlacement(names, devices.front().name));
    if (!a.allowance.empty())
      for (auto& d : devices) d.allowance = parseBytes(a.allowance);
  }
  spec.shardAxis = shardAxisFromString(a.shardAxis);
  spec.check({}, names);
  spec.networkOptions = nlohmann::json::parse(o.toJson());
  return spec;
}

// Measured speeds of the devices of this host (a rank's "r1:cpu" is taken to be like this
// host's CPU), at the planned patch or the largest like it under kMeasureVoxels; planning-only
// GPUs that are not here keep the defaults.
std::map<std::string, engine::MeasuredSpeed> measureSpeeds(const run::RunSpec& spec, const MemoryPlanner& planner,
                                                           std::vector<DeviceSpec>& devices) {
  std::map<std::string, engine::MeasuredSpeed> measured;
  for (auto& d : devices) {
    const std::string local = splitRank(d.name).device;
    const bool here = local == "cpu" || (local.rfind("cuda:", 0) == 0 &&
                                          std::stoi(local.substr(5)) < engine::cudaDeviceCount());
    if (!here) continue;
    if (!measured.count(local))
      measured[local] = engine::measureTrainingSpeed(
          spec, local, engine::measurementPatch(spec.patch, planner.network().sizeDivisor));
    d.flopsPerSecond = measured[local].flopsPerSecond;
  }
  return measured;
}

std::string planHeader(const PlanArgs& a, const PlanRequest& req, const MemoryPlanner& planner,
                       const std::vector<std::string>& names) {
  return "U-Net base " + std::to_string(a.base) + " depth " + std::to_string(a.depth) + " (" +
         std::to_string(planner.network().parameters()) + " parameters), input " + cube(req.size) + " x batch " +
         std::to_string(a.batch) +
         (a.microBatches > 1 ? " in " + std::to_string(a.microBatches) + " micro-batches" : "") + ", " +
         req.precision.toString(names) + ", " + a.optimizer + (req.checkpoint.empty() ? "" : ", checkpointing") +
         (req.offload ? ", host offload" : "") +
         // The layout the fp32 CPU stages train in (--cpu-layout; auto follows the CPU).
         (std::any_of(req.devices.begin(), req.devices.end(), [](const DeviceSpec& d) { return !d.isCuda(); })
              ? (req.cpuChannelsLast ? ", channels-last CPU weights" : ", NCDHW CPU weights")
              : "");
}

void printStepTime(const MemoryPlan& plan, const StepTime& time, const std::string& speeds, std::ostream& os) {
  char line[320];
  char how[96] = "";
  if (time.pipelinedRanks > 0)
    std::snprintf(how, sizeof how, "GPipe over %d ranks x %d micro-batches, busiest rank computes %.3g s; ",
                  time.pipelinedRanks, plan.microBatches, time.computeSeconds);
  else
    std::snprintf(how, sizeof how, "compute %.3g s, ", time.computeSeconds);
  std::snprintf(line, sizeof line, "predicted step time: %.3g s (%stransfers %.3g s; %s)\n", time.seconds, how,
                time.transferSeconds, speeds.empty() ? "default device speeds" : ("measured: " + speeds).c_str());
  os << line;
}

// The largest cube for `r` into out[key] and, without --json, onto os.
void printLargestCube(const PlanArgs& a, const MemoryPlanner& planner, const PlanRequest& r, const char* key,
                      const std::string& label, nlohmann::ordered_json& out, std::ostream& os) {
  const LargestVolume lv = largestCube(planner, r, a.autoPlace);
  nlohmann::ordered_json j{{"edge", lv.edge}, {"step", lv.step}, {"exact", lv.exact},
                           {"limiting_device", lv.next.limitingDevice}, {"limiting_stage", lv.next.limitingStage},
                           {"offload", r.offload}, {"offload_bytes", lv.plan.offloadBytes}};
  // The auto-placer may recompute stages the request did not (AutoPlacer: it also tries every
  // stage recomputed); the capacity is only what it is with them.
  std::vector<std::string> recomputed;
  for (const auto& st : lv.plan.stages)
    if (st.checkpointed) recomputed.push_back(st.name);
  if (lv.edge > 0) {
    j["placement"] = nlohmann::json::parse(lv.placement.toJson());
    j["recompute"] = recomputed;
  }
  out[key] = j;
  if (a.json) return;
  os << "\nLargest cube" << (a.autoPlace ? " with auto-placement" : " for this placement") << label << ": ";
  if (lv.edge == 0) os << "none fits (not even " << lv.step << "^3)\n";
  else
    os << lv.edge << "^3 (peak " << fmt(lv.plan.maxPeak()) << ", placement " << lv.placement.describe()
       << (recomputed.empty() ? std::string()
           : recomputed.size() == lv.plan.stages.size() ? std::string(", every stage recomputed")
                                                         : ", recomputed: " + join(recomputed))
       << (lv.plan.offloadBytes > 0 ? ", host memory for offload " + fmt(lv.plan.offloadBytes) : "") << ")\n";
  if (!lv.next.devices.empty())
    os << "  next size " << cube(lv.next.size) << ": " << verdict(lv.next) << "\n";
  if (!lv.exact) os << "  (auto-placement was heuristic for some sizes)\n";
}

void runPlan(const PlanArgs& a) {
  model::UNet3dOptions o;
  o.base_channels(a.base).depth(a.depth).in_channels(a.inChannels).out_channels(a.outChannels);
  o.norm(model::normFromString(a.norm));
  MemoryPlanner planner(model::unetStructure(o));
  const auto names = planner.network().stageNames();
  std::vector<DeviceSpec> devices;
  run::RunSpec spec = planSpec(a, o, names, devices);
  std::map<std::string, engine::MeasuredSpeed> measured;
  if (a.measureSpeed) measured = measureSpeeds(spec, planner, devices);
  if (a.cpuSpeed > 0)
    for (auto& d : devices)
      if (splitRank(d.name).device == "cpu") d.flopsPerSecond = a.cpuSpeed;
  if (a.inference) {
    if (a.volume.empty()) throw InvalidArgument("--inference needs --volume X,Y,Z (the image as the network sees it)");
    if (a.perPass < 1) throw InvalidArgument("--windows-per-pass must be at least 1");
    const auto v = run::parseSize(a.volume);  // x, y, z
    spec.window = a.window == "0" ? std::array<std::int64_t, 3>{0, 0, 0} : run::parseSize(a.window);
    spec.overlap = a.overlap;
    try {
      spec.mirror = run::mirrorFromString(a.mirror);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("--mirror: ") + e.what());
    }
    runInferencePlan(a, planner, spec.inferencePlanRequest(names, devices, {v[2], v[1], v[0]}, a.perPass));
    return;
  }
  PlanRequest req = spec.planRequest(names, devices);
  req.adam = a.optimizer == "adam";
  for (auto& d : req.devices) d.rankLinkBytesPerSecond = a.rankLinkGbps * 1e9 / 8;
  nlohmann::ordered_json out;
  std::ostream& os = std::cout;
  const std::string header = planHeader(a, req, planner, names);
  std::string method;
  if (a.autoPlace) {
    AutoPlaceResult r = AutoPlacer(planner).place(req);
    req.placement = r.placement;
    req.checkpoint = r.checkpoint;
    method = r.method + " (" + std::to_string(r.evaluated) + " placements simulated)";
    out["auto"] = {{"method", r.method}, {"exact", r.exact}, {"evaluated", r.evaluated},
                   {"placement", nlohmann::json::parse(r.placement.toJson())}};
  }
  const MemoryPlan plan = planner.plan(req);
  const StepTime time = predictStepTime(plan, req.devices, planner.network());
  out["plan"] = nlohmann::json::parse(plan.toJson());
  out["plan"]["cpu_channels_last"] = req.cpuChannelsLast;
  out["plan"]["predicted_step_seconds"] = time.seconds;
  out["plan"]["predicted_compute_seconds"] = time.computeSeconds;
  out["plan"]["predicted_transfer_seconds"] = time.transferSeconds;
  out["plan"]["predicted_pipelined_ranks"] = time.pipelinedRanks;
  std::string speeds;
  for (const auto& [device, m] : measured) {
    out["plan"]["measured_speeds"][device] = {{"flops_per_second", m.flopsPerSecond}, {"step_seconds", m.stepSeconds},
                                              {"step_flops", m.stepFlops}, {"patch", m.patch}};
    char one[96];
    std::snprintf(one, sizeof one, "%s%s %.1f GFLOP/s", speeds.empty() ? "" : ", ", device.c_str(), m.flopsPerSecond / 1e9);
    speeds += one;
  }
  if (!a.json) {
    os << header << "\nplacement: " << req.placement.describe() << (a.autoPlace ? "  [auto: " + method + "]" : "")
       << "\n\n";
    printPlan(plan, os);
    printStepTime(plan, time, speeds, os);
    os << "\n" << verdict(plan) << "\n";
  }
  if (a.largest) {
    // The largest cube as asked, then (when it did not ask for it) with host offload of the
    // recomputed stages' inputs, so both capacities are on one screen.
    printLargestCube(a, planner, req, "largest", req.offload ? " and host offload" : "", out, os);
    const bool anyCuda = std::any_of(req.devices.begin(), req.devices.end(), [](const DeviceSpec& d) { return d.isCuda(); });
    if (!req.offload && anyCuda && (a.autoPlace || !req.checkpoint.empty())) {
      PlanRequest withOffload = req;
      withOffload.offload = true;
      printLargestCube(a, planner, withOffload, "largest_offload", " and host offload", out, os);
    }
  }
  if (a.json) os << out.dump(2) << "\n";
}

} // namespace

void addPlanCommands(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "Predict per-stage and per-device memory of a training step (--inference: of a prediction)");
  cmd->add_option("--patch,--size", args->size, "network input size: N (cube) or X,Y,Z (old: DxHxW)")->capture_default_str();
  cmd->add_option("--batch", args->batch, "Batch size")->capture_default_str();
  cmd->add_option("--micro-batches", args->microBatches,
                  "ranks: the batch as M micro-batches (GPipe keeps all M in flight)")->capture_default_str();
  cmd->add_option("--base", args->base, "U-Net base channels")->capture_default_str();
  cmd->add_option("--depth", args->depth, "U-Net depth")->capture_default_str();
  cmd->add_option("--in-channels", args->inChannels)->capture_default_str();
  cmd->add_option("--out-channels", args->outChannels)->capture_default_str();
  cmd->add_option("--norm", args->norm, "none | instance | batch")->capture_default_str();
  cmd->add_option("--precision", args->precision,
                  "fp32 | bf16 (every stage) | P:stage,stage (those stages in P, the others in the other: "
                  "bf16:enc0,dec0, fp32:head)")
      ->capture_default_str();
  cmd->add_option("--devices", args->devices, "Planning-only devices: cuda:0=16GiB,cuda:1=16GiB (default: the devices present)");
  auto* pl = cmd->add_option("--placement", args->placement, "stage=device pairs, JSON text or file");
  auto* au = cmd->add_flag("--auto", args->autoPlace, "Choose the placement automatically");
  pl->excludes(au);
  cmd->add_option("--recompute,--checkpoint", args->checkpoint, "activation checkpointing: all | none | enc0,dec0");
  const planner::PlannerOptions defaults;
  cmd->add_option("--allowance", args->allowance,
                  "Fixed cost per device beyond its tensors (default: measured on present CUDA devices, else " +
                      formatBytes(static_cast<double>(defaults.cudaContextBytes + defaults.cudnnWorkspaceBytes)) +
                      " CUDA; " + formatBytes(static_cast<double>(defaults.cpuAllowanceBytes)) + " CPU)");
  cmd->add_option("--optimizer", args->optimizer, "adam | sgd")->capture_default_str();
  cmd->add_option("--shard-axis", args->shardAxis,
                  "sharded stages (enc0=cuda:0+cuda:1): the axis their slabs are cut along, depth | height | width")
      ->capture_default_str();
  cmd->add_flag("--measure-speed", args->measureSpeed,
                "Measure the training speed of this host's devices (a few training steps at the planned "
                "patch, or the largest like it up to 96^3) "
                "for the predicted step time and --auto, instead of the default speeds");
  cmd->add_option("--cpu-speed", args->cpuSpeed,
                  "training speed of every CPU device in FLOP/s, as --measure-speed measured it (so several plans "
                  "share one measurement)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rank-link-gbps", args->rankLinkGbps,
                  "the link between ranks in Gbit/s, for the predicted step (default: loopback's, measured here)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--largest", args->largest, "Also find the largest cube that fits (with --auto: also with host offload)");
  cmd->add_flag("--offload", args->offload,
                "host offload: recomputed stages on GPUs keep their saved inputs in pinned host memory");
  cmd->add_option("--cpu-layout", args->cpuLayout,
                  "weights of fp32 CPU stages: auto (channels-last on CPUs without AVX-512), ncdhw or channels-last");
  cmd->add_flag("--inference", args->inference,
                "Plan a prediction instead of a training step (the network's pass and the Inferer's host buffers)");
  cmd->add_option("--volume", args->volume, "--inference: the image as the network sees it, N or X,Y,Z voxels");
  cmd->add_option("--window", args->window, "--inference: sliding window N or X,Y,Z (0: the whole volume in one pass)")
      ->capture_default_str();
  cmd->add_option("--overlap", args->overlap, "--inference: overlap of the windows")->check(CLI::Range(0.0, 0.95))->capture_default_str();
  cmd->add_option("--windows-per-pass", args->perPass, "--inference: windows in one forward pass")->capture_default_str();
  cmd->add_option("--mirror", args->mirror, "--inference: test-time mirroring axes (xyz, z, none)")->capture_default_str();
  cmd->callback([args] { runPlan(*args); });
}

} // namespace splitseg::cli
