#include "core/export/TorchScriptExport.h"
#include "core/base/DurableFile.h"
#include "core/base/Error.h"

#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/torch.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;

namespace splitseg::exporter {

namespace {

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// One TorchScript class per nn::Module instance, named after its path; all in one compilation
// unit so the saved file is self-contained.
torch::jit::Module mirror(torch::nn::Module& m, const std::string& path,
                          const std::shared_ptr<torch::jit::CompilationUnit>& cu) {
  torch::jit::Module jm(c10::QualifiedName("__torch__.splitseg_export." + sanitize(path)), cu);
  for (auto& p : m.named_parameters(/*recurse=*/false)) jm.register_parameter(p.key(), p.value(), false);
  for (auto& b : m.named_buffers(/*recurse=*/false))
    if (b.value().defined()) jm.register_buffer(b.key(), b.value());
  for (auto& c : m.named_children())
    jm.register_module(c.key(), mirror(*c.value(), path + "_" + c.key(), cu));
  return jm;
}

// The stages in order, as the executor runs them but on one device.
torch::Tensor runAll(model::StagedNetwork& net, const torch::Tensor& x) {
  const auto specs = net.stageSpecs();
  std::map<std::string, torch::Tensor> outputs{{model::kInput, x}};
  torch::Tensor last;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::vector<torch::Tensor> in;
    for (const auto& name : specs[i].inputs) in.push_back(outputs.at(name));
    last = net.runStage(i, in);
    outputs[specs[i].name] = last;
  }
  return last;
}

} // namespace

std::string preprocessingPathFor(const std::string& modelPath) {
  fs::path p(modelPath);
  return (p.parent_path() / (p.stem().string() + ".preprocessing.json")).string();
}

ExportResult exportTorchScript(model::StagedNetwork& net, const std::string& path, const ExportOptions& o) {
  if (path.empty()) throw InvalidArgument("export: no output file given");
  auto& root = net.root();
  root.to(torch::kCPU);
  root.eval();  // dropout off; the traced graph is the inference graph

  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module jm = mirror(root, net.architecture(), cu);

  std::array<std::int64_t, 3> size = o.exampleSize;
  for (auto& s : size)
    if (s <= 0) s = 2 * net.sizeDivisor();
  const auto example = torch::randn({1, net.inChannels(), size[0], size[1], size[2]});

  torch::jit::Stack inputs{example};
  auto fn = [&net](torch::jit::Stack in) -> torch::jit::Stack { return {runAll(net, in.at(0).toTensor())}; };
  std::shared_ptr<torch::jit::tracer::TracingState> state;
  try {
    torch::NoGradGuard noGrad;
    state = torch::jit::tracer::trace(inputs, fn, [](const torch::autograd::Variable&) { return std::string(); },
                                      /*strict=*/true, /*force_outplace=*/false, &jm, {"x"})
                .first;
  } catch (const c10::Error& e) {
    torch::jit::tracer::abandon();
    throw Error("export: cannot trace " + net.architecture() + ": " + e.what_without_backtrace());
  }
  auto function = cu->create_function(c10::QualifiedName(*jm.type()->name(), "forward"), state->graph);
  jm.type()->addMethod(function);

  // The traced module must agree with the network before anything is written.
  {
    torch::NoGradGuard noGrad;
    const auto expected = runAll(net, example);
    const auto got = jm.forward({example}).toTensor();
    if (!torch::allclose(expected, got, 1e-5, 1e-5))
      throw Error("export: the traced module does not reproduce the network (max difference " +
                  std::to_string((expected - got).abs().max().item<double>()) + ")");
  }

  std::error_code ec;
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = makeTempFileBeside(path);  // unique: two exports never collide
  try {
    jm.save(tmp);
  } catch (const c10::Error& e) {
    fs::remove(tmp, ec);
    throw IoError(path, std::string("cannot write: ") + e.what_without_backtrace());
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  commitTempFile(tmp, path);  // fsync, rename, fsync folder; removes tmp on failure

  ExportResult r;
  r.modelPath = path;
  r.preprocessingPath = preprocessingPathFor(path);
  r.parameters = net.parameterCount();
  nlohmann::json pre = nlohmann::json::parse(o.preprocessingJson.empty() ? "{}" : o.preprocessingJson);
  const bool binary = net.outChannels() == 1;
  nlohmann::json meta{
      {"format", "splitseg-torchscript-1"},
      {"architecture", net.architecture()},
      {"options", nlohmann::json::parse(net.optionsJson())},
      {"input", {{"layout", "NCDHW (D=z, H=y, W=x)"}, {"channels", net.inChannels()},
                 {"size_divisor", net.sizeDivisor()}, {"dtype", "float32"}}},
      {"output", {{"channels", net.outChannels()},
                  {"kind", "logits"},
                  {"activation", binary ? "sigmoid" : "softmax"},
                  {"labels", binary ? "sigmoid(logits) > 0.5" : "argmax over channels (0 = background)"}}},
      {"preprocessing", pre},
      {"window", o.patch},
      {"parameters", r.parameters}};
  writeFileDurably(r.preprocessingPath, meta.dump(2) + "\n");
  return r;
}

} // namespace splitseg::exporter
