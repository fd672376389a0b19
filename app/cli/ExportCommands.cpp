// `export`: a trained checkpoint as TorchScript (torch.jit.load in Python) plus the
// preprocessing JSON beside it. --sample writes an input and SplitSeg's own output for it, so
// a consumer (and tests/cli/test_export) can check the exported model reproduces SplitSeg.
#include "app/cli/CliSupport.h"
#include "core/run/RunSpec.h"
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/engine/Devices.h"
#include "core/engine/SplitExecutor.h"
#include "core/engine/LegacyCheckpoint.h"
#include "core/engine/Trainer.h"
#include "core/export/TorchScriptExport.h"

#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <iostream>

namespace splitseg::cli {

namespace {
struct ExportArgs {
  std::string checkpoint;
  std::string out;
  std::string exampleSize;
  std::string sample;
  std::string placement;
  std::uint64_t seed = 1;
};

// torch::pickle_save writes what Python's torch.load reads.
void writeTensor(const torch::Tensor& t, const std::string& path) {
  const auto bytes = torch::pickle_save(t.contiguous().cpu());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw IoError(path, "cannot write");
}

void runExport(const ExportArgs& a) {
  engine::CheckpointInfo info;
  auto net = engine::loadNetwork(a.checkpoint, &info);
  exporter::ExportOptions o;
  o.preprocessingJson = info.run.preprocessing.toJson();
  o.patch = info.run.patch;
  if (!a.exampleSize.empty()) {
    const auto s = run::parseSize(a.exampleSize);  // x,y,z
    o.exampleSize = {s[2], s[1], s[0]};
  }
  nlohmann::json result;
  if (!a.sample.empty()) {
    // SplitSeg's output through the engine (placed as asked), before export merges it to the CPU.
    std::filesystem::create_directories(a.sample);
    torch::manual_seed(a.seed);
    const std::int64_t n = 2 * net->sizeDivisor();
    const auto input = torch::randn({1, net->inChannels(), n, n + net->sizeDivisor(), n});
    engine::SplitExecutor executor(
        net, placement::Placement::parse(a.placement, net->stageNames(), engine::runnableDeviceNames().front()));
    net->root().eval();
    torch::Tensor output;
    {
      torch::NoGradGuard noGrad;
      output = executor.forward(input).cpu();
    }
    writeTensor(input, (std::filesystem::path(a.sample) / "input.pt").string());
    writeTensor(output, (std::filesystem::path(a.sample) / "output.pt").string());
    result["sample"] = a.sample;
  }
  const auto r = exporter::exportTorchScript(*net, a.out, o);
  result["out"] = r.modelPath;
  result["preprocessing"] = r.preprocessingPath;
  result["architecture"] = net->architecture();
  result["parameters"] = r.parameters;
  std::cout << result.dump() << "\n";
}
} // namespace

void addExportCommands(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", "export a checkpoint as TorchScript (torch.jit.load) + preprocessing JSON");
  cmd->add_option("--checkpoint", a->checkpoint, "trained checkpoint")->required();
  cmd->add_option("--out", a->out, "TorchScript file to write (model.pt)")->required();
  cmd->add_option("--example-size", a->exampleSize, "tracing input size N or X,Y,Z (default 2x the size divisor)");
  cmd->add_option("--sample", a->sample, "also write input.pt and SplitSeg's output.pt (torch.load) to this folder");
  cmd->add_option("--placement", a->placement, "placement for the --sample run (stage=device pairs)");
  cmd->add_option("--seed", a->seed, "seed of the --sample input")->capture_default_str();
  cmd->callback([a] { runExport(*a); });

  // Checkpoints written before version 3 are TorchScript archives, which may run code when read;
  // they are refused everywhere else and converted here, on the user's word that they trust them.
  auto from = std::make_shared<std::string>(), to = std::make_shared<std::string>();
  auto* convert = app.add_subcommand("convert-checkpoint",
                                     "rewrite an old (TorchScript-archive) checkpoint in the current format; reading "
                                     "the old format can run code stored in it: only for files you trust");
  convert->add_option("old", *from, "old checkpoint")->required();
  convert->add_option("new", *to, "checkpoint to write (the current format)")->required();
  convert->callback([from, to] {
    engine::convertLegacyCheckpoint(*from, *to);
    const auto info = engine::readCheckpointInfo(*to);
    std::cout << nlohmann::json{{"out", *to}, {"step", info.step}, {"architecture", info.run.architecture}}.dump()
              << "\n";
  });
}

} // namespace splitseg::cli
