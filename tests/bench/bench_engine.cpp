// SplitSeg's side of the peer benchmarks (tests/bench/run.sh, tests/gpu/run.sh).
//   export: builds the seed U-Net and a phantom, writes weights + input + eval logits, so the
//           Python peers run on exactly the same numbers (torch::pickle_save <-> torch.load).
//   train:  times Trainer::step() as the app runs it (memory meter, loss, Dice, Adam included).
//   infer:  times Inferer::predict (sliding window) and writes the probabilities for comparison.
// Everything prints one JSON line, so the scripts never parse human text.
#include "tests/bench/BenchSupport.h"
#include "core/base/Error.h"
#include "core/data/Phantom.h"
#include "core/data/SampleSource.h"
#include "core/engine/Devices.h"
#include "core/engine/HostCachingAllocator.h"
#include "core/engine/Inferer.h"
#include "core/engine/Loss.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"
#include "core/model/NetworkStructureOf.h"
#include "core/model/UNet3d.h"
#include "core/planner/MemoryPlanner.h"
#include "core/plugin/PluginRegistry.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>
#include <torch/torch.h>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define SPLITSEG_BENCH_CUDA 1
#endif

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <unistd.h>
#include <iterator>
#include <map>

namespace splitseg::bench {

namespace {
// Whether the CPU caching allocator served this run, and how often it reused a block.
nlohmann::json hostCacheJson() {
  const auto* cache = engine::hostCachingAllocator();
  if (!cache) return {{"enabled", false}};
  const auto s = cache->stats();
  return {{"enabled", s.limit > 0}, {"hits", s.hits}, {"misses", s.misses}, {"cached_bytes", s.cached}, {"heap_bytes", s.heap}};
}

// Named tensors as a pickled dict: the one format both torch::pickle_load and torch.load read.
void saveTensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [k, v] : named) dict.insert(k, v.detach().to(torch::kCPU).contiguous());
  const auto bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::map<std::string, torch::Tensor> loadTensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : torch::pickle_load(bytes).toGenericDict()) out[e.key().toStringRef()] = e.value().toTensor();
  return out;
}

model::UNet3d makeNet(std::int64_t base, int depth = 5, const std::string& norm = "none") {
  return model::UNet3d(model::UNet3dOptions().base_channels(base).depth(depth).norm(model::normFromString(norm)));
}

// Process resident memory from /proc/self/status ("VmRSS" now, "VmHWM" its high-water mark), bytes.
std::int64_t procStatusBytes(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;  // kB
  return -1;
}

// Resets VmHWM to the current RSS (Linux: "5" to clear_refs), so the high-water mark is this run's.
bool resetResidentPeak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

void loadWeights(model::UNet3d& net, const std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard noGrad;
  for (auto& p : net->named_parameters()) {
    auto it = state.find("param." + p.key());
    if (it == state.end()) throw std::runtime_error("state lacks parameter " + p.key());
    p.value().copy_(it->second);
  }
}

data::Sample phantomSample(const std::array<std::int64_t, 3>& size, std::uint64_t seed) {
  data::PhantomOptions po;
  po.size = size;
  po.seed = seed;
  auto ph = data::makePhantom(po);
  return data::Sample{{ph.image}, ph.label};
}

// The same sample every step: the peers time the network, not phantom generation.
class FixedSource final : public data::SampleSource {
public:
  explicit FixedSource(data::Sample s) : sample_(std::move(s)) {}
  data::Sample next(const std::array<std::int64_t, 3>&, std::mt19937_64&) override { return sample_; }
  std::string describe() const override { return "fixed phantom"; }

private:
  data::Sample sample_;
};

// Stand-in for a second device on a CPU-only machine: every tensor crossing the boundary
// between stage `boundary-1` and `boundary` is copied (forward) and its gradient copied back
// (backward), which is what a real device transfer costs on top of the stage work.
class BoundaryNetwork final : public model::StagedNetwork {
public:
  BoundaryNetwork(model::UNet3d net, std::size_t boundary) : net_(std::move(net)), boundary_(boundary) {
    specs_ = net_->stageSpecs();
    for (std::size_t i = 0; i < specs_.size(); ++i) index_[specs_[i].name] = i;
  }
  std::vector<model::StageSpec> stageSpecs() const override { return specs_; }
  torch::Tensor runStage(std::size_t i, const std::vector<torch::Tensor>& inputs) override {
    std::vector<torch::Tensor> in = inputs;
    for (std::size_t j = 0; j < in.size(); ++j) {
      const auto& name = specs_[i].inputs[j];
      const bool srcSecond = name != model::kInput && index_.at(name) >= boundary_;
      if (srcSecond == (i >= boundary_)) continue;
      in[j] = in[j].clone();
      if (in[j].requires_grad()) in[j].register_hook([](torch::Tensor g) { return g.clone(); });
    }
    return net_->runStage(i, in);
  }
  std::shared_ptr<torch::nn::Module> stageModule(std::size_t i) override { return net_->stageModule(i); }
  torch::nn::Module& root() override { return *net_; }
  std::int64_t sizeDivisor() const override { return net_->sizeDivisor(); }
  std::int64_t inChannels() const override { return net_->inChannels(); }
  std::int64_t outChannels() const override { return net_->outChannels(); }
  std::string architecture() const override { return net_->architecture(); }
  std::string optionsJson() const override { return net_->optionsJson(); }

private:
  model::UNet3d net_;
  std::size_t boundary_;
  std::vector<model::StageSpec> specs_;
  std::map<std::string, std::size_t> index_;
};

// Caps the CUDA caching allocator at `gib` GiB of device 0, standing in for a smaller card.
void capCudaMemory(double gib) {
#ifdef SPLITSEG_BENCH_CUDA
  if (gib <= 0 || !torch::cuda::is_available()) return;
  double total = 0;
  for (const auto& d : engine::detectDevices())
    if (d.name == "cuda:0") total = static_cast<double>(d.totalBytes);
  if (total <= 0) return;
  c10::cuda::CUDACachingAllocator::setMemoryFraction(std::min(1.0, gib * 1073741824.0 / total), 0);
#else
  (void)gib;
#endif
}

void releaseCuda() {
#ifdef SPLITSEG_BENCH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

struct Common {
  std::int64_t base = 16;
  int depth = 5;
  std::string norm = "none";
  std::string arch = "unet3d";  // train only: any registered architecture (plugins included)
  std::string size = "64";
  std::uint64_t seed = 1;
  int threads = 0;
  std::string state;
  void add(CLI::App& cmd) {
    cmd.add_option("--base", base)->capture_default_str();
    cmd.add_option("--depth", depth)->capture_default_str();
    cmd.add_option("--norm", norm, "none | instance | batch")->capture_default_str();
    cmd.add_option("--arch", arch, "train: architecture (unet3d, or a plugin's such as resunet3d)")->capture_default_str();
    cmd.add_option("--size", size, "N or X,Y,Z")->capture_default_str();
    cmd.add_option("--seed", seed)->capture_default_str();
    cmd.add_option("--threads", threads, "intra-op threads (0: LibTorch default)");
    cmd.add_option("--state", state, "tensor file written by export");
  }
  void applyThreads() const {
    if (threads > 0) torch::set_num_threads(threads);
  }
};

void runExport(const Common& c) {
  c.applyThreads();
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));
  auto net = makeNet(c.base);
  const auto sample = phantomSample(parseSize(c.size), c.seed);
  auto input = engine::toTensor(sample.channels).unsqueeze(0);                          // (1, 1, D, H, W)
  auto target = engine::toTensor(sample.label).round().to(torch::kLong).unsqueeze(0);  // (1, D, H, W)
  std::vector<std::pair<std::string, torch::Tensor>> named{{"input", input}, {"target", target}};
  for (const auto& p : net->named_parameters()) named.emplace_back("param." + p.key(), p.value());
  {
    torch::NoGradGuard noGrad;
    net->eval();
    named.emplace_back("logits_eval", net->forward(input));
  }
  saveTensors(c.state, named);
  std::cout << nlohmann::json{{"state", c.state}, {"parameters", net->parameterCount()}}.dump() << "\n";
}

struct TrainArgs {
  Common c;
  int warmup = 2, repeats = 5;
  std::string placement, precision = "fp32", recompute;
  int emulateSplit = 0;  // stage index of an emulated device boundary (0: none)
  bool plain = false;    // hand-written loop without the Trainer (diagnostic)
  bool plainMeter = false;  // the plain loop under the Trainer's CPU memory meter (diagnostic)
  std::string plainDevice = "cpu";  // the plain loop's device (tests/gpu/peer.sh: Trainer vs loop on a GPU)
  double capGib = 0;     // CUDA memory cap (GiB of cuda:0), 0: none
  std::string largest;   // "START,STEP,MAX": grow the cube until a step runs out of memory
  int batch = 1;
  bool plan = false;     // also print the planner's prediction for this very run (planner accuracy)
  // RunSpec::cpuLayout ("auto", "ncdhw", "channels-last"), or "other": the layout auto does not
  // pick on this CPU (what the default gains or loses against the alternative).
  std::string cpuLayout = "auto";
  // Record the Trainer's timeline and report where a step's time goes (medians per part); on CUDA
  // each span ends with a synchronize, so such a run is a breakdown, not a timing.
  bool timeline = false;
  bool noPrefetch = false;  // draw each batch when its step starts (Trainer::setPrefetch(false))
};

// What the planner predicts for exactly this run (same network object, same RunSpec) on the CPU:
// its device peak (with its default CPU allowance), and the bytes that exist before the first
// step (the parameters and Adam's moments, allocated when the Trainer is built), which the
// Trainer's meter cannot see because it starts counting at the first step.
nlohmann::json planPrediction(model::StagedNetwork& net, const run::RunSpec& spec) {
  planner::MemoryPlanner planner(model::networkStructure(net));
  const auto plan = planner.plan(spec.planRequest(net.stageNames(), {{"cpu", std::int64_t{1} << 40, -1}}));
  std::int64_t parameterBytes = 0, optimizerBytes = 0;
  for (const auto& st : plan.stages) {
    parameterBytes += st.parameterBytes;
    optimizerBytes += st.optimizerBytes;
  }
  for (const auto& d : plan.devices)
    if (d.name == "cpu")
      return {{"peak", d.peak}, {"allowance", d.allowance}, {"parameter_bytes", parameterBytes},
              {"optimizer_bytes", optimizerBytes},
              {"peak_stage", d.peakStage}, {"peak_phase", d.peakPhase}};
  return nlohmann::json::object();
}

nlohmann::json trainOnce(const TrainArgs& a) {
  // Resident memory before the network exists: the run's growth is measured from here.
  const bool peakReset = resetResidentPeak();
  const std::int64_t rssBefore = procStatusBytes("VmRSS");
  auto net = makeNet(a.c.base, a.c.depth, a.c.norm);
  if (!a.c.state.empty()) loadWeights(net, loadTensors(a.c.state));
  auto sample = phantomSample(parseSize(a.c.size), a.c.seed);
  std::vector<double> times, cpuTimes;
  std::map<std::string, std::int64_t> peaks, reservedPeaks;
  std::map<std::string, std::vector<double>> partTimes;  // --timeline: seconds per part of each step
  std::string placementText;
  nlohmann::json predicted;
  bool channelsLast = false;  // the layout the step ran in (the plain loop: NCDHW)
  if (a.plain) {
    // What a C++ user writes by hand: no executor, no meter (isolates the engine's own overhead).
    const torch::Device device(a.plainDevice);
    net->to(device);
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
    auto input = engine::toTensor(sample.channels).unsqueeze(0).to(device);
    auto target = engine::toTensor(sample.label).round().to(torch::kLong).unsqueeze(0).to(device);
    net->train();
    engine::CpuMemoryCounter counter;
    for (int i = 0; i < a.warmup + a.repeats; ++i) {
      std::unique_ptr<engine::CpuMemoryScope> scope;
      if (a.plainMeter) scope = std::make_unique<engine::CpuMemoryScope>(counter);
      const auto t0 = Clock::now();
      const double c0 = cpuSeconds();
      adam.zero_grad(true);
      auto r = engine::segmentationLoss(net->forward(input), target);
      r.loss.backward();
      adam.step();
      (void)r.loss.item<double>();
      // As the Python peer times a step: until the device has finished it.
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      if (i >= a.warmup) {
        times.push_back(seconds(t0));
        cpuTimes.push_back(cpuSeconds() - c0);
      }
    }
    placementText = std::string(a.plainMeter ? "plain loop + CPU memory meter (" : "plain loop (") + device.str() + ")";
  } else {
    std::shared_ptr<model::StagedNetwork> staged;
    if (a.c.arch != "unet3d")
      staged = plugin::PluginRegistry::instance().create(
          a.c.arch, nlohmann::json{{"base_channels", a.c.base}, {"depth", a.c.depth}}.dump());
    else if (a.emulateSplit > 0) staged = std::make_shared<BoundaryNetwork>(net, static_cast<std::size_t>(a.emulateSplit));
    else staged = net.ptr();
    auto p = placement::Placement::parse(a.placement, staged->stageNames(), engine::runnableDeviceNames().front());
    run::RunSpec o;
    o.steps = a.warmup + a.repeats;
    o.patch = parseSize(a.c.size);
    o.batch = a.batch;
    o.seed = a.c.seed;
    o.setPlacement(p);
    o.precision = placement::StagePrecisions::parse(a.precision, staged->stageNames());
    o.recompute = run::parseStageList(a.recompute, staged->stageNames());
    o.cpuLayout = a.cpuLayout != "other" ? planner::cpuLayoutFromString(a.cpuLayout)
                  : planner::usesChannelsLast(planner::CpuLayout::Auto) ? planner::CpuLayout::Ncdhw
                                                                              : planner::CpuLayout::ChannelsLast;
    channelsLast = planner::usesChannelsLast(o.cpuLayout);
    o.timeline = a.timeline;
    engine::Trainer trainer(staged, std::make_shared<FixedSource>(sample), o);
    if (a.noPrefetch) trainer.setPrefetch(false);
    for (int i = 0; i < a.warmup + a.repeats; ++i) {
      const double c0 = cpuSeconds();
      auto m = trainer.step();
      if (i < a.warmup) continue;
      times.push_back(m.seconds);
      cpuTimes.push_back(cpuSeconds() - c0);
      for (const auto& d : m.memory) {
        peaks[d.device] = std::max(peaks[d.device], d.peak);
        reservedPeaks[d.device] = std::max(reservedPeaks[d.device], d.reservedPeak);
      }
      if (a.timeline) {
        // The batch (drawing and converting it) and the loss apart from the other waits and forwards.
        std::map<std::string, double> parts;
        for (const auto& sp : m.timeline) {
          const bool own = sp.stage == "batch" || sp.stage == "loss";
          parts[own ? sp.stage : engine::toString(sp.kind)] += sp.end - sp.start;
        }
        for (const auto& [part, sec] : parts) partTimes[part].push_back(sec);
      }
    }
    if (a.plan) predicted = planPrediction(*staged, o);
    placementText = p.describe() + (a.emulateSplit > 0 ? " (emulated boundary at stage " +
                                                             std::to_string(a.emulateSplit) + ")" : "");
  }
  nlohmann::json parts = nlohmann::json::object();
  for (auto& [part, v] : partTimes) parts[part] = median(v);
  return {{"median_step_seconds", median(times)}, {"steps", times}, {"cpu_steps", cpuTimes}, {"timeline_parts", parts},
          {"median_step_cpu_seconds", median(cpuTimes)}, {"placement", placementText},
          {"size", parseSize(a.c.size)}, {"base", a.c.base}, {"precision", a.precision},
          {"recompute", a.recompute}, {"peak_bytes", peaks}, {"reserved_peak_bytes", reservedPeaks},
          {"threads", torch::get_num_threads()},
          {"host_cache", hostCacheJson()}, {"batch", a.batch}, {"depth", a.c.depth}, {"norm", a.c.norm},
          {"arch", a.c.arch}, {"predicted", predicted}, {"channels_last", channelsLast}, {"cpu_layout", a.cpuLayout},
          {"resident", {{"before", rssBefore}, {"peak", procStatusBytes("VmHWM")}, {"peak_reset", peakReset}}}};
}

struct InferArgs {
  Common c;
  std::string window = "64";
  double overlap = 0.5;
  int repeats = 3;
  std::string out;
  std::string placement;
  bool defaultLayout = false;  // diagnostic: keep the weights NCDHW (no channels-last CPU weights)
  int windowBatch = 1;         // windows per forward pass (MONAI's sw_batch_size)
};

nlohmann::json runInfer(const InferArgs& a) {
  a.c.applyThreads();
  auto net = makeNet(a.c.base);
  if (!a.c.state.empty()) loadWeights(net, loadTensors(a.c.state));
  auto staged = std::shared_ptr<model::StagedNetwork>(net.ptr());
  engine::SplitExecutor executor(staged, placement::Placement::parse(a.placement, staged->stageNames(), engine::runnableDeviceNames().front()));
  engine::Inferer inferer(executor);
  auto sample = phantomSample(parseSize(a.c.size), a.c.seed);
  auto image = engine::toTensor(sample.channels);  // (1, D, H, W)
  engine::InferOptions o;
  o.window = parseSize(a.window);
  o.overlap = a.overlap;
  o.cpuChannelsLast = !a.defaultLayout;
  o.batch = a.windowBatch;
  {
    // Warm-up: one window through the same path (layout, allocator, kernels), not a whole run.
    auto w = parseSize(a.window);
    (void)inferer.predict(torch::zeros({image.size(0), w[2], w[1], w[0]}), o);
  }
  std::vector<double> times, cpuTimes;
  engine::Prediction pred;
  for (int i = 0; i < a.repeats; ++i) {
    const auto t0 = Clock::now();
    const double c0 = cpuSeconds();
    pred = inferer.predict(image, o);
    times.push_back(seconds(t0));
    cpuTimes.push_back(cpuSeconds() - c0);
  }
  if (!a.out.empty()) {
    const auto w = parseSize(a.window);
    saveTensors(a.out, {{"image", image},
                        {"probabilities", pred.probabilities},
                        {"importance", engine::gaussianWindow({w[2], w[1], w[0]}, o.sigmaScale)}});
  }
  return {{"median_seconds", median(times)}, {"runs", times}, {"cpu_runs", cpuTimes}, {"size", parseSize(a.c.size)},
          {"window", parseSize(a.window)}, {"overlap", a.overlap}, {"threads", torch::get_num_threads()},
          {"host_cache", hostCacheJson()}, {"cpu_channels_last", o.cpuChannelsLast}, {"window_batch", o.batch}};
}
// One measurement; a step that runs out of memory is a result ({"oom": true}), not a failure.
nlohmann::json trainOrOom(const TrainArgs& a) {
  auto oom = [&](const std::string& what) {
    releaseCuda();
    return nlohmann::json{{"oom", true}, {"size", parseSize(a.c.size)}, {"precision", a.precision},
                          {"recompute", a.recompute}, {"placement", a.placement}, {"error", what.substr(0, 300)}};
  };
  try {
    return trainOnce(a);
  } catch (const OutOfMemoryError& e) {
    return oom(e.what());
  } catch (const c10::OutOfMemoryError& e) {  // e.g. while moving the weights onto the device
    return oom(e.what_without_backtrace());
  }
}

nlohmann::json runTrain(const TrainArgs& a) {
  a.c.applyThreads();
  capCudaMemory(a.capGib);
  if (a.largest.empty()) return trainOrOom(a);
  // Largest cube: grow by STEP from START until a step does not fit (or MAX), in one process
  // so CUDA start-up is paid once.
  const auto range = parseSize(a.largest);
  nlohmann::json tried = nlohmann::json::array();
  std::int64_t best = 0;
  for (std::int64_t n = range[0]; n <= range[2]; n += range[1]) {
    TrainArgs one = a;
    one.c.size = std::to_string(n);
    auto r = trainOrOom(one);
    tried.push_back({{"size", n}, {"oom", r.value("oom", false)}, {"peak_bytes", r.value("peak_bytes", nlohmann::json())},
                     {"reserved_peak_bytes", r.value("reserved_peak_bytes", nlohmann::json())},
                     {"median_step_seconds", r.value("median_step_seconds", 0.0)}});
    releaseCuda();
    if (r.value("oom", false)) break;
    best = n;
  }
  return {{"largest", best}, {"tried", tried}, {"cap_gib", a.capGib}, {"precision", a.precision},
          {"recompute", a.recompute}, {"placement", a.placement}};
}
} // namespace

} // namespace splitseg::bench

#ifdef SPLITSEG_BENCH_VOLUME
namespace splitseg::bench {
void addVolumeCommand(CLI::App& app);  // bench_volume.cpp (ITK builds only)
}
#endif

int main(int argc, char** argv) {
  using namespace splitseg::bench;
  CLI::App app{"SplitSeg peer benchmarks (engine side)"};
  app.require_subcommand(1);

  Common exportArgs;
  auto* ex = app.add_subcommand("export", "write initial weights, input and eval logits");
  exportArgs.add(*ex);
  ex->callback([&] { runExport(exportArgs); });

  TrainArgs train;
  auto* tr = app.add_subcommand("train", "time training steps");
  train.c.add(*tr);
  tr->add_option("--warmup", train.warmup)->capture_default_str();
  tr->add_option("--repeats", train.repeats)->capture_default_str();
  tr->add_option("--placement", train.placement, "stage=device pairs");
  tr->add_option("--precision", train.precision)->capture_default_str();
  tr->add_option("--recompute", train.recompute, "all, none or a stage list");
  tr->add_option("--emulate-split", train.emulateSplit, "copy tensors crossing before this stage index");
  tr->add_flag("--plain", train.plain, "hand-written loop without the Trainer");
  tr->add_flag("--plain-meter", train.plainMeter, "with --plain: run each step under the CPU memory meter");
  tr->add_flag("--timeline", train.timeline, "report where each step's time goes (medians per part; CUDA: synchronises)");
  tr->add_flag("--no-prefetch", train.noPrefetch, "draw each batch when its step starts, not at the end of the step before");
  tr->add_option("--device", train.plainDevice, "with --plain: the device the loop runs on")->capture_default_str();
  tr->add_option("--cap-gib", train.capGib, "cap the CUDA allocator at this many GiB of cuda:0");
  tr->add_option("--largest", train.largest, "START,STEP,MAX: grow the cube until out of memory");
  tr->add_option("--batch", train.batch)->capture_default_str();
  tr->add_flag("--plan", train.plan, "also print the planner's CPU prediction for this run");
  tr->add_option("--cpu-layout", train.cpuLayout,
                 "auto, ncdhw, channels-last, or other (the layout auto does not pick on this CPU)");
  tr->callback([&] { std::cout << runTrain(train).dump() << "\n"; });

  InferArgs infer;
  auto* in = app.add_subcommand("infer", "time sliding-window inference");
  infer.c.add(*in);
  in->add_option("--window", infer.window)->capture_default_str();
  in->add_option("--overlap", infer.overlap)->capture_default_str();
  in->add_option("--repeats", infer.repeats)->capture_default_str();
  in->add_option("--placement", infer.placement, "stage=device pairs");
  in->add_option("--out", infer.out, "write image + probabilities here");
  in->add_option("--window-batch", infer.windowBatch, "windows per forward pass")->capture_default_str();
  in->add_flag("--default-layout", infer.defaultLayout, "diagnostic: no channels-last CPU weights");
  in->callback([&] { std::cout << runInfer(infer).dump() << "\n"; });

#ifdef SPLITSEG_BENCH_VOLUME
  addVolumeCommand(app);
#endif
  try {
    // As splitseg-cli does; run.sh times SPLITSEG_HOST_CACHE=off as a diagnostic row.
    splitseg::engine::installHostCachingAllocatorFromEnvironment();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
