#include "tests/support/GpuChecks.h"

#include "core/engine/Devices.h"
#include "core/engine/MemoryMeter.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/Trainer.h"
#include "core/model/UNet3d.h"

#include <ATen/Context.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

namespace splitseg::checks {

nlohmann::json CheckResult::toJson() const {
  const char* s = status == Status::Pass ? "pass" : status == Status::Fail ? "fail" : "skip";
  nlohmann::json j{{"check", name}, {"status", s}, {"figures", figures}};
  if (!detail.empty()) j["detail"] = detail;
  return j;
}

ExactFp32Guard::ExactFp32Guard() {
  auto& c = at::globalContext();
  tf32CuDNN_ = c.allowTF32CuDNN();
  tf32CuBLAS_ = c.allowTF32CuBLAS();
  deterministic_ = c.deterministicCuDNN();
  benchmark_ = c.benchmarkCuDNN();
  c.setAllowTF32CuDNN(false);
  c.setAllowTF32CuBLAS(false);
  c.setDeterministicCuDNN(true);
  c.setBenchmarkCuDNN(false);
}

ExactFp32Guard::~ExactFp32Guard() {
  auto& c = at::globalContext();
  c.setAllowTF32CuDNN(tf32CuDNN_);
  c.setAllowTF32CuBLAS(tf32CuBLAS_);
  c.setDeterministicCuDNN(deterministic_);
  c.setBenchmarkCuDNN(benchmark_);
}

Closeness compare(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol) {
  const auto x = a.detach().to(torch::kCPU, torch::kDouble);
  const auto y = b.detach().to(torch::kCPU, torch::kDouble);
  const auto diff = (x - y).abs();
  Closeness c;
  c.maxAbs = diff.numel() ? diff.max().item<double>() : 0.0;
  c.within = diff.numel() == 0 || (diff <= atol + rtol * y.abs()).all().item<bool>();
  return c;
}

bool allEqual(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

torch::Tensor referenceForward(model::StagedNetwork& net, int d, const torch::Tensor& x) {
  auto run = [&net](std::size_t i, std::vector<torch::Tensor> in) {
    torch::Device dev(torch::kCPU);
    for (const auto& p : net.stageModule(i)->parameters()) {
      dev = p.device();
      break;
    }
    for (auto& t : in) t = t.to(dev);
    return net.runStage(i, in);
  };
  std::vector<torch::Tensor> enc;
  torch::Tensor y = x;
  for (int l = 0; l < d - 1; ++l) {
    y = run(static_cast<std::size_t>(l), {y});
    enc.push_back(y);
  }
  y = run(static_cast<std::size_t>(d - 1), {y});
  for (int l = d - 2; l >= 0; --l) y = run(static_cast<std::size_t>(d + (d - 2 - l)), {y, enc[static_cast<std::size_t>(l)]});
  return run(static_cast<std::size_t>(2 * d - 1), {y});
}

std::string checkDevice() { return engine::cudaAvailable() ? "cuda:0" : "cpu"; }

namespace {
// The run with its stages on `p` (the placement travels in the run description).
run::RunSpec placed(run::RunSpec r, const placement::Placement& p) {
  r.setPlacement(p);
  return r;
}
constexpr int kDepth = 4;

// No norm layers: the checks' bounds were set (and passed on the H200) on this network.
std::shared_ptr<model::StagedNetwork> tinyNet(std::uint64_t seed, double dropout) {
  torch::manual_seed(seed);
  return model::UNet3d(model::UNet3dOptions().base_channels(4).depth(kDepth).dropout({dropout, dropout, dropout}).norm(
                           model::Norm::None))
      .ptr();
}

// Rows of a cross-device check: every stage on `device`, and three splits with the rest on the CPU.
std::vector<std::pair<std::string, std::string>> rows() {
  return {{"all-on-device", "*"},
          {"encoders", "enc0=D,enc1=D,enc2=D"},
          {"skips-cross", "enc0=D,dec0=D,head=D"},
          {"alternating", "enc1=D,bottleneck=D,dec1=D"}};
}

placement::Placement placementFor(const std::string& row, const std::string& device, const model::StagedNetwork& net) {
  if (row == "*") return placement::Placement::uniform(net.stageNames(), device);
  std::string text = row;
  for (std::size_t p; (p = text.find('D')) != std::string::npos;) text.replace(p, 1, device);
  return placement::Placement::parse(text, net.stageNames(), "cpu");
}

CheckResult fail(CheckResult r, const std::string& why) {
  r.status = CheckResult::Status::Fail;
  if (!r.detail.empty()) r.detail += "; ";
  r.detail += why;
  return r;
}

CheckResult skip(CheckResult r, const std::string& why) {
  r.status = CheckResult::Status::Skip;
  r.detail = why;
  return r;
}
} // namespace

CheckResult splitEquivalence(const std::string& device, int edge) {
  CheckResult r{"split_equivalence"};
  ExactFp32Guard exact;
  const bool cross = device != "cpu";
  const double rtol = cross ? 1e-4 : 1e-6, atol = cross ? 1e-5 : 1e-6;
  r.figures["rtol"] = rtol;
  r.figures["atol"] = atol;
  auto net = tinyNet(7, 0.0);
  torch::manual_seed(8);
  const auto x = torch::randn({2, 1, edge, edge, edge});
  const auto target = torch::rand({2, 1, edge, edge, edge});
  const auto ref = referenceForward(*net, kDepth, x);
  (ref - target).pow(2).mean().backward();
  std::vector<torch::Tensor> refGrads;
  for (const auto& p : net->root().parameters()) refGrads.push_back(p.grad().clone());
  for (const auto& [row, text] : rows()) {
    net->root().zero_grad();
    engine::SplitExecutor exec(net, placementFor(text, device, *net));
    const auto out = exec.forward(x);
    (out - target.to(out.device())).pow(2).mean().backward();
    const Closeness o = compare(out, ref, rtol, atol);
    double gradMax = 0;
    bool gradsOk = true;
    std::size_t i = 0;
    for (const auto& p : net->root().parameters()) {
      if (!p.grad().defined()) return fail(r, row + ": a parameter got no gradient");
      const Closeness g = compare(p.grad(), refGrads[i++], rtol, atol);
      gradMax = std::max(gradMax, g.maxAbs);
      gradsOk = gradsOk && g.within;
    }
    r.figures[row] = {{"output_max_abs", o.maxAbs}, {"grad_max_abs", gradMax}};
    if (!o.within) r = fail(r, row + ": output differs from the unsplit CPU model");
    if (!gradsOk) r = fail(r, row + ": gradients differ from the unsplit CPU model");
  }
  engine::SplitExecutor home(net, placement::Placement::uniform(net->stageNames(), "cpu"));  // back on the CPU
  return r;
}

CheckResult offloadEquivalence(const std::string& device, int edge) {
  CheckResult r{"offload_equivalence"};
  if (device == "cpu")
    return skip(r, "needs a GPU (on the CPU nothing is offloaded; CTest covers the path with host copies)");
  ExactFp32Guard exact;
  const double rtol = 1e-6, atol = 1e-6;
  auto net = tinyNet(7, 0.0);
  torch::manual_seed(8);
  const auto x = torch::randn({2, 1, edge, edge, edge});
  const auto target = torch::rand({2, 1, edge, edge, edge});
  const auto stages = net->stageNames();
  const std::set<std::string> all(stages.begin(), stages.end());
  const torch::Device dev(device);
  auto run = [&](bool offload, torch::Tensor& out, std::vector<torch::Tensor>& grads, std::int64_t& peak,
                 std::shared_ptr<const engine::OffloadChain>& chain) {
    net->root().zero_grad();
    engine::SplitExecutor exec(net, placement::Placement::uniform(stages, device), {}, all);
    exec.setOffload(offload);
    torch::cuda::synchronize(dev.index());
    engine::cudaResetPeak(device);
    out = exec.forward(x);
    (out - target.to(out.device())).pow(2).mean().backward();
    torch::cuda::synchronize(dev.index());
    peak = engine::cudaMemory(device).peak;
    out = out.detach().cpu();
    grads.clear();
    for (const auto& p : net->root().parameters()) grads.push_back(p.grad().defined() ? p.grad().cpu() : torch::Tensor());
    chain = exec.lastOffload();
  };
  torch::Tensor keptOut, offOut;
  std::vector<torch::Tensor> keptGrads, offGrads;
  std::int64_t keptPeak = 0, offPeak = 0;
  std::shared_ptr<const engine::OffloadChain> none, chain;
  run(false, keptOut, keptGrads, keptPeak, none);
  run(true, offOut, offGrads, offPeak, chain);
  const Closeness o = compare(offOut, keptOut, rtol, atol);
  double gradMax = 0;
  for (std::size_t i = 0; i < keptGrads.size(); ++i) {
    if (!offGrads[i].defined() || !keptGrads[i].defined()) return fail(r, "a parameter got no gradient");
    const Closeness g = compare(offGrads[i], keptGrads[i], rtol, atol);
    gradMax = std::max(gradMax, g.maxAbs);
    if (!g.within) r = fail(r, "gradients with host offload differ from those without");
  }
  r.figures["output_max_abs"] = o.maxAbs;
  r.figures["grad_max_abs"] = gradMax;
  r.figures["peak_kept_bytes"] = keptPeak;
  r.figures["peak_offload_bytes"] = offPeak;
  if (!o.within) r = fail(r, "output with host offload differs from the one without");
  if (!chain) return fail(r, "no offload chain: the executor did not offload");
  r.figures["copies_to_host"] = chain->copiesToHost();
  r.figures["prefetches"] = chain->prefetches();
  if (chain->copiesToHost() < static_cast<int>(stages.size())) r = fail(r, "not every recomputed stage was offloaded");
  if (chain->copiesBack() != chain->copiesToHost()) r = fail(r, "not every offloaded input came back");
  if (chain->prefetches() != static_cast<int>(stages.size()) - 1) r = fail(r, "the next stage's inputs were not prefetched");
  if (chain->hostBytes() != 0) r = fail(r, "host copies left after backward");
  engine::SplitExecutor home(net, placement::Placement::uniform(stages, "cpu"));
  return r;
}

CheckResult shardEquivalence(const std::string& device, int edge) {
  CheckResult r{"shard_equivalence"};
  if (device == "cpu") return skip(r, "needs a second device");
  ExactFp32Guard exact;
  const double rtol = 1e-4, atol = 1e-5;
  auto net = tinyNet(7, 0.0);
  torch::manual_seed(8);
  const auto x = torch::randn({2, 1, edge, edge, edge});
  const auto target = torch::rand({2, 1, edge, edge, edge});
  engine::SplitExecutor cpu(net, placement::Placement::uniform(net->stageNames(), "cpu"));
  const auto ref = cpu.forward(x);
  (ref - target).pow(2).mean().backward();
  std::vector<torch::Tensor> refGrads;
  for (const auto& p : net->root().parameters()) refGrads.push_back(p.grad().clone());
  std::string every;
  for (const auto& s : net->stageNames()) every += (every.empty() ? "" : ",") + s + "=" + device + "+cpu";
  const std::vector<std::pair<std::string, std::string>> shardRows{
      {"full-resolution cpu+" + device, "enc0=cpu+" + device + ",dec0=cpu+" + device + ",head=cpu+" + device},
      {"every stage " + device + "+cpu", every}};
  for (const auto& [row, text] : shardRows) {
    net->root().zero_grad();
    engine::SplitExecutor exec(net, placement::Placement::parse(text, net->stageNames(), "cpu"));
    const auto out = exec.forward(x);
    (out - target.to(out.device())).pow(2).mean().backward();
    const Closeness o = compare(out.cpu(), ref, rtol, atol);
    double gradMax = 0;
    bool gradsOk = true;
    std::size_t i = 0;
    for (const auto& p : net->root().parameters()) {
      if (!p.grad().defined()) return fail(r, row + ": a parameter got no gradient");
      const Closeness g = compare(p.grad().cpu(), refGrads[i++], rtol, atol);
      gradMax = std::max(gradMax, g.maxAbs);
      gradsOk = gradsOk && g.within;
    }
    r.figures[row] = {{"output_max_abs", o.maxAbs}, {"grad_max_abs", gradMax}};
    if (!o.within) r = fail(r, row + ": output differs from the unsharded CPU model");
    if (!gradsOk) r = fail(r, row + ": gradients differ from the unsharded CPU model");
  }
  engine::SplitExecutor home(net, placement::Placement::uniform(net->stageNames(), "cpu"));
  return r;
}

CheckResult dropoutReproduced(const std::string& device, int edge) {
  CheckResult r{"dropout_reproduced"};
  ExactFp32Guard exact;
  auto net = tinyNet(7, 0.5);
  net->root().train();
  torch::manual_seed(9);
  const auto x = torch::randn({1, 1, edge, edge, edge});
  for (const auto& [row, text] : rows()) {
    engine::SplitExecutor exec(net, placementFor(text, device, *net));
    torch::manual_seed(11);
    const auto out = exec.forward(x);
    torch::manual_seed(11);
    const auto again = exec.forward(x);
    torch::manual_seed(12);
    const auto other = exec.forward(x);
    torch::manual_seed(11);
    const auto ref = referenceForward(*net, kDepth, x);
    const Closeness c = compare(out, ref, 1e-5, 1e-5);
    const bool same = torch::equal(out, again);
    const double otherDiff = (other - out).abs().max().item<double>();
    r.figures[row] = {{"vs_reference_max_abs", c.maxAbs}, {"same_seed_identical", same}, {"other_seed_max_abs", otherDiff}};
    if (!c.within) r = fail(r, row + ": masks not reproduced on the stages' devices");
    if (!same) r = fail(r, row + ": the same seed gave different outputs");
    // Masks must matter well beyond the tolerance, or the comparison above proves nothing.
    if (otherDiff < 10 * 1e-5) r = fail(r, row + ": another seed changed the output by less than 10x the tolerance");
  }
  engine::SplitExecutor home(net, placement::Placement::uniform(net->stageNames(), "cpu"));
  return r;
}

namespace {
run::RunSpec trainOptions(int edge) {
  run::RunSpec o;
  o.steps = 10;
  o.patch = {edge, edge, edge};
  o.seed = 5;
  o.learningRate = 1e-3;
  return o;
}

std::int64_t parameterBytesOn(model::StagedNetwork& net, const std::string& device) {
  std::int64_t bytes = 0;
  for (const auto& p : net.root().parameters())
    if (p.device().str() == device) bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  return bytes;
}
} // namespace

CheckResult trainingEquivalence(const std::string& device, int edge) {
  CheckResult r{"training_equivalence"};
  ExactFp32Guard exact;
  const bool cross = device != "cpu";
  const double rtol = cross ? 1e-4 : 1e-6, atol = cross ? 1e-6 : 1e-7;
  auto a = tinyNet(3, 0.0), b = tinyNet(3, 0.0);
  auto source = std::make_shared<data::PhantomSource>();
  engine::Trainer onDevice(a, source, placed(trainOptions(edge), placement::Placement::uniform(a->stageNames(), device)));
  engine::Trainer onCpu(b, source, placed(trainOptions(edge), placement::Placement::uniform(b->stageNames(), "cpu")));
  for (int s = 1; s <= 2; ++s) {
    const double la = onDevice.step().loss, lb = onCpu.step().loss;
    r.figures["loss_step" + std::to_string(s)] = {{"device", la}, {"cpu", lb}};
    if (std::abs(la - lb) > atol + rtol * std::abs(lb)) r = fail(r, "loss differs at step " + std::to_string(s));
  }
  const auto pa = a->root().parameters(), pb = b->root().parameters();
  double maxAbs = 0;
  bool within = true;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const Closeness c = compare(pa[i], pb[i], rtol, atol);
    maxAbs = std::max(maxAbs, c.maxAbs);
    within = within && c.within;
  }
  r.figures["weights_max_abs_after_2_steps"] = maxAbs;
  if (!within) r = fail(r, "weights differ after two steps");

  // A split step: the meter reports every device of the placement, consistently.
  auto c = tinyNet(3, 0.0);
  const auto split = placementFor("enc0=D,enc1=D,dec1=D,dec0=D,head=D", device, *c);
  engine::Trainer trainer(c, source, placed(trainOptions(edge), split));
  const auto m = trainer.step();
  r.figures["split_step_loss"] = m.loss;
  if (!std::isfinite(m.loss)) r = fail(r, "split step loss not finite");
  if (m.memory.size() != split.devices().size()) r = fail(r, "meter does not report every device");
  for (const auto& d : m.memory) {
    r.figures["memory"][d.device] = {{"peak", d.peak}, {"allocated", d.allocated}, {"reserved", d.reserved},
                                     {"reserved_peak", d.reservedPeak}, {"total", d.total}, {"free", d.free}};
    if (d.peak <= 0 || d.total <= 0 || d.free > d.total) r = fail(r, d.device + ": implausible memory figures");
    if (d.device == "cpu") continue;
    // After the step: weights, their gradients and Adam's two moments live on the device.
    const std::int64_t held = 4 * parameterBytesOn(*c, d.device);
    r.figures["memory"][d.device]["weights_grads_moments"] = held;
    if (d.allocated < held) r = fail(r, d.device + ": allocator holds less than weights + gradients + moments");
    if (d.peak < d.allocated || d.reserved < d.allocated) r = fail(r, d.device + ": peak or reserved below allocated");
    if (d.reservedPeak < d.peak || d.reservedPeak < d.reserved) r = fail(r, d.device + ": reserved peak below a peak or reserved");
  }
  return r;
}

CheckResult resumeExact(const std::string& device, const std::string& workDir, int edge) {
  CheckResult r{"resume_exact"};
  ExactFp32Guard exact;
  const std::string path = (std::filesystem::path(workDir) / "splitseg-resume-check.pt").string();
  auto source = std::make_shared<data::PhantomSource>();
  auto a = tinyNet(3, 0.5);
  engine::Trainer whole(a, source, placed(trainOptions(edge), placement::Placement::uniform(a->stageNames(), device)));
  whole.step();
  whole.saveCheckpoint(path);
  whole.step();
  whole.step();
  auto b = tinyNet(99, 0.5);  // other initial weights: the checkpoint must replace them
  engine::Trainer resumed(b, source, placed(trainOptions(edge), placement::Placement::uniform(b->stageNames(), device)));
  resumed.loadCheckpoint(path);
  resumed.step();
  resumed.step();
  std::filesystem::remove(path);
  const auto pa = a->root().parameters(), pb = b->root().parameters();
  double maxAbs = 0;
  for (std::size_t i = 0; i < pa.size(); ++i)
    maxAbs = std::max(maxAbs, (pa[i].detach().cpu() - pb[i].detach().cpu()).abs().max().item<double>());
  r.figures["weights_max_abs_after_resume"] = maxAbs;
  if (maxAbs != 0.0) r = fail(r, "resumed run differs from the uninterrupted one (dropout masks or optimizer state)");
  return r;
}

CheckResult allowance(const std::string& device) {
  CheckResult r{"cuda_allowance"};
  r.figures["torch"] = TORCH_VERSION;
  if (device.rfind("cuda", 0) != 0) return skip(r, "no CUDA device");
  const int index = torch::Device(device).index();
  const auto a = engine::cudaAllowance(index);
  const auto mem = engine::cudaMemory(device);
  r.figures["context"] = a.contextBytes;
  r.figures["workspace"] = a.workspaceBytes;
  r.figures["method"] = a.method;
  r.figures["warnings"] = engine::cudnnWarnings();
  if (!a.measured()) return fail(r, "not measured: " + a.method);
  if (a.contextBytes < (std::int64_t{16} << 20) || a.contextBytes > mem.total / 4)
    r = fail(r, "context size implausible");
  return r;
}

} // namespace splitseg::checks
