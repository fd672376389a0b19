#include "app/cli/CliSupport.h"
#include "app/cli/Commands.h"
#include "core/base/Error.h"
#include "core/data/Phantom.h"
#include "core/engine/Devices.h"
#include "core/engine/Inferer.h"
#include "core/engine/Loss.h"
#include "core/engine/Tensors.h"
#include "core/engine/Trainer.h"

#ifdef SPLITSEG_WITH_ITK
#include "core/io/VolumeReader.h"
#include "core/io/VolumeWriter.h"
#include "core/volume/Preprocessing.h"
#endif

#include <chrono>
#include <iostream>

namespace splitseg::cli {

namespace {
struct InferArgs {
  NetworkArgs net;
  std::string synthetic;
  std::string image;
  std::string out;
  std::string probabilities;
  std::string checkpoint;
  std::string window;
  double overlap = 0.5;
  int batch = 1;
  std::string placement;
  std::string progress = "bar";
  std::uint64_t seed = 1;
};

// Runs the inferer with the window options of the command line; returns seconds taken.
double timedPredict(const InferArgs& a, engine::Inferer& inferer, const torch::Tensor& image,
                    engine::Prediction& prediction) {
  engine::InferOptions o;
  if (!a.window.empty()) o.window = parseSize(a.window);
  o.overlap = a.overlap;
  o.batch = a.batch;
  CliProgress progress(a.progress);
  const auto t0 = std::chrono::steady_clock::now();
  prediction = inferer.predict(image, o, &progress);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#ifdef SPLITSEG_WITH_ITK
// A real volume: preprocess exactly as the checkpoint's training did, predict, and write the
// labels back in the source geometry (so it overlays in Slicer / ITK-SNAP).
void inferVolume(const InferArgs& a, engine::Inferer& inferer, const std::string& preprocessingJson,
                 const std::string& placement) {
  if (a.out.empty()) throw InvalidArgument("give --out FILE (.nii.gz, .nrrd or .mha) for the segmentation");
  const Volume source = io::readVolume(a.image);
  const Preprocessing pre = Preprocessing::fromJson(preprocessingJson);
  const Volume input = pre.applyToImage(source);
  engine::Prediction pred;
  const double seconds = timedPredict(a, inferer, engine::toTensor(input).unsqueeze(0), pred);
  Volume labels = engine::toVolume(pred.labels.to(torch::kFloat), input.geometry());
  labels = pre.restore(labels, source.geometry(), Interpolation::Nearest);
  labels.setPixelType("uint8");
  io::writeSegmentation(labels, source.geometry(), a.out);
  std::cout << nlohmann::json{{"seconds", seconds}, {"out", a.out}, {"placement", placement}}.dump() << "\n";
}
#endif

void runInfer(const InferArgs& a) {
  if (a.synthetic.empty() && a.image.empty())
    throw InvalidArgument("give an input: --image FILE or --synthetic SIZE");
  std::shared_ptr<model::StagedNetwork> net;
  engine::CheckpointInfo info;
  if (!a.checkpoint.empty()) net = engine::loadNetwork(a.checkpoint, &info);
  else net = model::UNet3d(a.net.options()).ptr();
  const auto placement =
      placement::Placement::parse(a.placement, net->stageNames(), engine::runnableDeviceNames().front());
  engine::SplitExecutor executor(net, placement);
  engine::Inferer inferer(executor);
  if (!a.image.empty()) {
#ifdef SPLITSEG_WITH_ITK
    inferVolume(a, inferer, info.preprocessingJson, placement.describe());
    return;
#else
    throw InvalidArgument("this build has no image IO (built without ITK): use --synthetic SIZE");
#endif
  }

  data::PhantomOptions po;
  po.size = parseSize(a.synthetic);
  po.seed = a.seed;
  po.foregroundClasses = net->outChannels() == 1 ? 1 : static_cast<int>(net->outChannels() - 1);
  auto phantom = data::makePhantom(po);
  engine::Prediction pred;
  const double seconds = timedPredict(a, inferer, engine::toTensor(phantom.image).unsqueeze(0), pred);
  auto dice = engine::dicePerClass(pred.labels, engine::toTensor(phantom.label).round().to(torch::kLong),
                                   po.foregroundClasses);
  nlohmann::json out{{"seconds", seconds}, {"dice", dice}, {"size", po.size}, {"placement", placement.describe()}};
  std::cout << out.dump() << "\n";
}
} // namespace

void addInferCommands(CLI::App& app) {
  auto a = std::make_shared<InferArgs>();
  auto* cmd = app.add_subcommand("infer", "predict a segmentation (whole volume or sliding window)");
  a->net.add(*cmd);
  cmd->add_option("--synthetic", a->synthetic, "predict a synthetic phantom of this size and report Dice");
  cmd->add_option("--image", a->image, "volume to segment (NIfTI, NRRD, MetaImage, DICOM folder)");
  cmd->add_option("--out", a->out, "segmentation to write, in the image's geometry");
  cmd->add_option("--checkpoint", a->checkpoint, "trained checkpoint (without: untrained network)");
  cmd->add_option("--window", a->window, "sliding window N or X,Y,Z (default: whole volume)");
  cmd->add_option("--overlap", a->overlap, "window overlap")->capture_default_str()->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--batch", a->batch, "windows per forward pass")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--placement", a->placement, "stage=device pairs or a JSON file");
  cmd->add_option("--progress", a->progress, "jsonl|bar|none")->capture_default_str();
  cmd->add_option("--seed", a->seed, "phantom seed")->capture_default_str();
  cmd->callback([a] { runInfer(*a); });
}

} // namespace splitseg::cli
