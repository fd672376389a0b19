// splitseg-gpu-checks: the device checks as a plain executable (the accelerator machine has no Qt).
// Runs every check of tests/support/GpuChecks on one device, prints one JSON line per check and
// exits 1 when any failed (2 on bad arguments or an exception).
//   splitseg-gpu-checks [--device cuda:0|cpu] [--out FILE.jsonl] [--work DIR] [--edge N]
// Without --device: cuda:0 when CUDA is present, else cpu (a rehearsal: cross-device rows collapse).
#include "core/engine/Devices.h"
#include "core/engine/MemoryMeter.h"
#include "tests/support/GpuChecks.h"
#include "tests/support/GpuOomChecks.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

using namespace splitseg;

int main(int argc, char** argv) {
  std::string device = checks::checkDevice(), out, work = std::filesystem::temp_directory_path().string();
  int edge = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--device") device = next();
      else if (a == "--out") out = next();
      else if (a == "--work") work = next();
      else if (a == "--edge") edge = std::stoi(next());
      else throw std::runtime_error("unknown argument " + a);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "splitseg-gpu-checks: %s\n", e.what());
      return 2;
    }
  }
  std::ofstream file;
  if (!out.empty()) file.open(out);
  for (const auto& w : engine::cudnnWarnings()) std::fprintf(stderr, "warning: %s\n", w.c_str());

  using Check = std::function<checks::CheckResult()>;
  const std::vector<std::pair<std::string, Check>> all{
      {"cuda_allowance", [&] { return checks::allowance(device); }},  // first: before other contexts grow
      {"split_equivalence", [&] { return checks::splitEquivalence(device, edge); }},
      {"dropout_reproduced", [&] { return checks::dropoutReproduced(device, edge); }},
      {"shard_equivalence", [&] { return checks::shardEquivalence(device, 2 * edge); }},
      {"offload_equivalence", [&] { return checks::offloadEquivalence(device, 2 * edge); }},
      {"training_equivalence", [&] { return checks::trainingEquivalence(device, 2 * edge); }},
      {"resume_exact", [&] { return checks::resumeExact(device, work, 2 * edge); }},
      // Last: it caps the device's allocator (lifted again when it ends).
      {"out_of_memory_recovers", [&] { return checks::outOfMemoryRecovers(device, 2 * edge); }},
  };
  int failed = 0;
  for (const auto& [name, run] : all) {
    const auto t0 = std::chrono::steady_clock::now();
    checks::CheckResult r;
    try {
      r = run();
    } catch (const std::exception& e) {
      r.name = name;
      r.status = checks::CheckResult::Status::Fail;
      r.detail = std::string("exception: ") + e.what();
    }
    auto j = r.toJson();
    j["device"] = device;
    j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << j.dump() << std::endl;
    if (file) file << j.dump() << "\n";
    failed += !r.ok();
  }
  std::fprintf(stderr, "splitseg-gpu-checks on %s: %d of %zu failed\n", device.c_str(), failed, all.size());
  return failed ? 1 : 0;
}
