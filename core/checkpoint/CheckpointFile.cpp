#include "core/checkpoint/CheckpointFile.h"
#include "core/checkpoint/PickleCheck.h"
#include "core/base/DurableFile.h"
#include "core/base/Error.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace splitseg::checkpoint {

namespace {
constexpr const char* kFormat = "splitseg-checkpoint";
using torch::optim::AdamParamState;

// The bytes of a file already in memory, for PyTorchStreamReader.
class MemoryAdapter : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit MemoryAdapter(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

private:
  const std::vector<char>& bytes_;
};

std::string shapeText(c10::IntArrayRef s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

// Records only TorchScript archives (the format before version 3) hold.
bool isTorchScriptRecord(const std::string& r) { return r == "constants.pkl" || r.rfind("code/", 0) == 0; }

torch::Tensor cpuCopy(const torch::Tensor& t) { return t.detach().to(torch::kCPU).clone(); }

c10::impl::GenericDict newDict() { return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()); }

// Every value read from the pickle is checked for its kind; the message names where it sits.
const c10::IValue& field(const c10::impl::GenericDict& d, const std::string& key, const std::string& where,
                         const std::string& path) {
  auto it = d.find(c10::IValue(key));
  if (it == d.end()) throw FormatError(path, "checkpoint has no '" + where + key + "'");
  return it->value();
}

c10::impl::GenericDict asDict(const c10::IValue& v, const std::string& what, const std::string& path) {
  if (!v.isGenericDict()) throw FormatError(path, "checkpoint '" + what + "' is not a dictionary");
  return v.toGenericDict();
}

torch::Tensor asTensor(const c10::IValue& v, const std::string& what, const std::string& path) {
  if (!v.isTensor()) throw FormatError(path, "checkpoint '" + what + "' is not a tensor");
  auto t = v.toTensor();
  if (!t.defined() || t.layout() != torch::kStrided || t.is_quantized() || !t.device().is_cpu())
    throw FormatError(path, "checkpoint '" + what + "' is not a plain CPU tensor");
  return t;
}

double asNumber(const c10::IValue& v, const std::string& what, const std::string& path) {
  double x = 0;
  if (v.isDouble()) x = v.toDouble();
  else if (v.isInt()) x = static_cast<double>(v.toInt());
  else throw FormatError(path, "checkpoint '" + what + "' is not a number");
  if (!std::isfinite(x)) throw FormatError(path, "checkpoint '" + what + "' is not finite");
  return x;
}

std::map<std::string, torch::Tensor> tensorDict(const c10::IValue& v, const std::string& what, const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& e : asDict(v, what, path)) {
    if (!e.key().isString()) throw FormatError(path, "checkpoint '" + what + "' has a key that is not a name");
    const auto& name = e.key().toStringRef();
    out[name] = asTensor(e.value(), what + "." + name, path);
  }
  return out;
}

// Shape and dtype of `got` against what the network holds; one line naming the tensor.
void checkLike(const torch::Tensor& got, const torch::Tensor& want, const std::string& name, const std::string& path) {
  if (got.sizes() != want.sizes())
    throw FormatError(path, "tensor '" + name + "' has shape " + shapeText(got.sizes()) + " but the network's is " +
                                shapeText(want.sizes()));
  if (got.scalar_type() != want.scalar_type())
    throw FormatError(path, "tensor '" + name + "' is " + std::string(c10::toString(got.scalar_type())) +
                                " but the network's is " + c10::toString(want.scalar_type()));
  if (got.is_floating_point() && got.numel() > 0 && !torch::isfinite(got).all().item<bool>())
    throw FormatError(path, "tensor '" + name + "' has NaN or infinite values");
}

std::vector<std::pair<std::string, torch::Tensor>> namedState(torch::nn::Module& root) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : root.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : root.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}
} // namespace

CheckpointFile CheckpointFile::capture(torch::nn::Module& root, torch::optim::Adam& optimizer, run::CheckpointInfo info) {
  CheckpointFile f;
  f.info = std::move(info);
  for (const auto& [name, t] : namedState(root)) f.model[name] = cpuCopy(t);
  for (const auto& p : root.named_parameters()) {
    auto it = optimizer.state().find(p.value().unsafeGetTensorImpl());
    if (it == optimizer.state().end()) continue;  // saved before its first step
    const auto& st = static_cast<const AdamParamState&>(*it->second);
    Moments m;
    m.step = st.step();
    m.expAvg = cpuCopy(st.exp_avg());
    m.expAvgSq = cpuCopy(st.exp_avg_sq());
    if (st.max_exp_avg_sq().defined()) m.maxExpAvgSq = cpuCopy(st.max_exp_avg_sq());
    f.adam[p.key()] = std::move(m);
  }
  if (!optimizer.param_groups().empty()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(optimizer.param_groups().front().options());
    f.adamOptions = {o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), o.amsgrad()};
  }
  f.rng["cpu"] = torch::globalContext().defaultGenerator(torch::kCPU).get_state();
  if (torch::cuda::is_available())
    for (std::size_t i = 0; i < static_cast<std::size_t>(torch::cuda::device_count()); ++i) {
      const torch::Device d(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
      f.rng[d.str()] = torch::globalContext().defaultGenerator(d).get_state();
    }
  return f;
}

std::vector<char> CheckpointFile::serialize() const {
  auto root = newDict();
  root.insert("format", std::string(kFormat));
  root.insert("meta", info.toMetaJson());
  c10::Dict<std::string, torch::Tensor> model;
  for (const auto& [k, t] : this->model) model.insert(k, t.contiguous());
  root.insert("model", model);
  auto adam = newDict();
  for (const auto& [k, m] : this->adam) {
    auto d = newDict();
    d.insert("step", m.step);
    d.insert("exp_avg", m.expAvg.contiguous());
    d.insert("exp_avg_sq", m.expAvgSq.contiguous());
    if (m.maxExpAvgSq.defined()) d.insert("max_exp_avg_sq", m.maxExpAvgSq.contiguous());
    adam.insert(k, d);
  }
  root.insert("adam", adam);
  auto opts = newDict();
  opts.insert("lr", adamOptions.lr);
  opts.insert("beta1", adamOptions.beta1);
  opts.insert("beta2", adamOptions.beta2);
  opts.insert("eps", adamOptions.eps);
  opts.insert("weight_decay", adamOptions.weightDecay);
  opts.insert("amsgrad", adamOptions.amsgrad);
  root.insert("adam_options", opts);
  c10::Dict<std::string, torch::Tensor> rngs;
  for (const auto& [k, t] : rng) rngs.insert(k, t);
  root.insert("rng", rngs);

  // torch::pickle_save would tag every dict with torch.jit._pickle.restore_type_tag, a global
  // that torch.load(weights_only=True) refuses; the same pickler without tags writes plain dicts.
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* b, size_t n) { pickle.insert(pickle.end(), b, b + n); }, nullptr,
                              nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(root));
  pickler.stop();
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* b, size_t n) {
    const char* c = static_cast<const char*>(b);
    out.insert(out.end(), c, c + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

void CheckpointFile::write(const std::string& path) const {
  std::vector<char> bytes;
  try {
    bytes = serialize();
  } catch (const c10::Error& e) {
    throw IoError(path, std::string("cannot write checkpoint: ") + e.what_without_backtrace());
  }
  // Atomic and durable: a crash or a second writer leaves the previous checkpoint intact.
  writeFileDurably(path, std::string(bytes.begin(), bytes.end()));
}

namespace {
std::atomic<std::int64_t> fileReads{0};
} // namespace

std::int64_t CheckpointFile::readsSoFar() { return fileReads.load(); }

CheckpointFile CheckpointFile::read(const std::string& path) {
  ++fileReads;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw IoError(path, "checkpoint not found");
  if (!std::filesystem::is_regular_file(path, ec)) throw FormatError(path, "checkpoint is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path, "cannot read checkpoint size: " + ec.message());
  std::vector<char> bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "checkpoint of " + std::to_string(size) + " bytes does not fit in memory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)) || in.gcount() != static_cast<std::streamsize>(size))
    throw IoError(path, "cannot read checkpoint");
  return parse(bytes, path);
}

CheckpointFile CheckpointFile::parse(const std::vector<char>& bytes, const std::string& path) {
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "PK\x03\x04", 4) != 0)
    throw FormatError(path, "not a SplitSeg checkpoint (not a PyTorch zip archive)");
  c10::IValue value;
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MemoryAdapter>(bytes));
    for (const auto& r : reader.getAllRecords()) {
      if (isTorchScriptRecord(r))
        throw FormatError(path, "checkpoint in the old TorchScript format, which can run code when read; if you trust "
                                "it, convert it once: splitseg-cli convert-checkpoint " + path + " NEW.ckpt");
      // Records are stored uncompressed; one claiming more than the file holds is forged.
      if (reader.getRecordSize(r) > bytes.size()) throw FormatError(path, "checkpoint record '" + r + "' is damaged");
    }
    if (!reader.hasRecord("data.pkl")) throw FormatError(path, "not a SplitSeg checkpoint (no data.pkl)");
    const auto [pickle, pickleSize] = reader.getRecord("data.pkl");
    checkPickle(static_cast<const char*>(pickle.get()), pickleSize, path);  // before LibTorch's unpickler trusts it
    value = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw FormatError(path, std::string("not a readable checkpoint: ") + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    throw FormatError(path, "checkpoint is damaged (asks for more memory than there is)");
  }
  const auto root = asDict(value, "", path);
  const auto& format = field(root, "format", "", path);
  if (!format.isString() || format.toStringRef() != kFormat) throw FormatError(path, "not a SplitSeg checkpoint");
  const auto& meta = field(root, "meta", "", path);
  if (!meta.isString()) throw FormatError(path, "checkpoint 'meta' is not text");

  CheckpointFile f;
  f.info = run::CheckpointInfo::fromMetaJson(meta.toStringRef(), path);
  f.model = tensorDict(field(root, "model", "", path), "model", path);
  for (const auto& e : asDict(field(root, "adam", "", path), "adam", path)) {
    if (!e.key().isString()) throw FormatError(path, "checkpoint 'adam' has a key that is not a name");
    const std::string name = e.key().toStringRef(), where = "adam." + name + ".";
    const auto d = asDict(e.value(), "adam." + name, path);
    Moments m;
    const auto& step = field(d, "step", where, path);
    if (!step.isInt() || step.toInt() < 0) throw FormatError(path, "checkpoint '" + where + "step' is not a step count");
    m.step = step.toInt();
    m.expAvg = asTensor(field(d, "exp_avg", where, path), where + "exp_avg", path);
    m.expAvgSq = asTensor(field(d, "exp_avg_sq", where, path), where + "exp_avg_sq", path);
    if (d.contains("max_exp_avg_sq"))
      m.maxExpAvgSq = asTensor(d.at("max_exp_avg_sq"), where + "max_exp_avg_sq", path);
    f.adam[name] = std::move(m);
  }
  const auto o = asDict(field(root, "adam_options", "", path), "adam_options", path);
  auto& a = f.adamOptions;
  a.lr = asNumber(field(o, "lr", "adam_options.", path), "adam_options.lr", path);
  a.beta1 = asNumber(field(o, "beta1", "adam_options.", path), "adam_options.beta1", path);
  a.beta2 = asNumber(field(o, "beta2", "adam_options.", path), "adam_options.beta2", path);
  a.eps = asNumber(field(o, "eps", "adam_options.", path), "adam_options.eps", path);
  a.weightDecay = asNumber(field(o, "weight_decay", "adam_options.", path), "adam_options.weight_decay", path);
  const auto& ams = field(o, "amsgrad", "adam_options.", path);
  if (!ams.isBool()) throw FormatError(path, "checkpoint 'adam_options.amsgrad' is not true or false");
  a.amsgrad = ams.toBool();
  if (!(a.lr > 0) || !(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1) || !(a.eps > 0) || a.weightDecay < 0)
    throw FormatError(path, "checkpoint 'adam_options' are out of range");
  f.rng = tensorDict(field(root, "rng", "", path), "rng", path);
  return f;
}

namespace {
void checkWeights(const std::map<std::string, torch::Tensor>& model,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named, const std::string& path) {
  for (const auto& [name, want] : named) {
    auto it = model.find(name);
    if (it == model.end()) throw FormatError(path, "tensor '" + name + "' is missing from the checkpoint");
    checkLike(it->second, want, name, path);
  }
  if (model.size() != named.size())
    for (const auto& entry : model) {
      const std::string& name = entry.first;  // C++17 lambdas cannot capture a structured binding (clang)
      if (std::none_of(named.begin(), named.end(), [&](const auto& n) { return n.first == name; }))
        throw FormatError(path, "tensor '" + name + "' is not part of the network");
    }
}

void checkMoments(const std::map<std::string, CheckpointFile::Moments>& adam, torch::nn::Module& root,
                  const std::string& path) {
  const auto params = root.named_parameters();
  for (const auto& [name, m] : adam) {
    const auto* p = params.find(name);
    if (!p) throw FormatError(path, "optimizer state for '" + name + "', which is not a parameter of the network");
    checkLike(m.expAvg, *p, "adam." + name + ".exp_avg", path);
    checkLike(m.expAvgSq, *p, "adam." + name + ".exp_avg_sq", path);
    if (m.maxExpAvgSq.defined()) checkLike(m.maxExpAvgSq, *p, "adam." + name + ".max_exp_avg_sq", path);
  }
}

// The generator a state is for, when this machine has it.
std::optional<torch::Device> generatorDevice(const std::string& name) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (name.rfind("cuda:", 0) != 0 || name.size() > 8 || !torch::cuda::is_available()) return std::nullopt;
  const auto digits = name.substr(5);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int index = std::stoi(digits);
  if (index >= static_cast<int>(torch::cuda::device_count())) return std::nullopt;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}
} // namespace

void CheckpointFile::loadInto(torch::nn::Module& root, torch::optim::Adam* optimizer, const std::string& path) const {
  auto named = namedState(root);
  checkWeights(model, named, path);
  if (optimizer) {
    checkMoments(adam, root, path);
    for (const auto& [name, state] : rng) {
      const auto device = generatorDevice(name);
      if (!device) continue;
      const auto current = torch::globalContext().defaultGenerator(*device).get_state();
      if (state.sizes() != current.sizes() || state.scalar_type() != current.scalar_type())
        throw FormatError(path, "checkpoint 'rng." + name + "' is not a generator state");
      // LibTorch checks the content only when a state is set: try it on a copy of the generator.
      try {
        torch::globalContext().defaultGenerator(*device).clone().set_state(state);
      } catch (const c10::Error&) {
        throw FormatError(path, "checkpoint 'rng." + name + "' is not a valid generator state");
      }
    }
  }
  torch::NoGradGuard noGrad;
  for (auto& [name, t] : named) t.copy_(model.at(name));
  if (!optimizer) return;
  auto params = root.named_parameters();
  for (const auto& [name, m] : adam) {
    const auto& p = params[name];
    auto st = std::make_unique<AdamParamState>();
    st->step(m.step);
    st->exp_avg(m.expAvg.to(p.device()).clone());
    st->exp_avg_sq(m.expAvgSq.to(p.device()).clone());
    if (m.maxExpAvgSq.defined()) st->max_exp_avg_sq(m.maxExpAvgSq.to(p.device()).clone());
    optimizer->state()[p.unsafeGetTensorImpl()] = std::move(st);
  }
  for (auto& group : optimizer->param_groups()) {
    auto& o = static_cast<torch::optim::AdamOptions&>(group.options());
    o.lr(adamOptions.lr).betas({adamOptions.beta1, adamOptions.beta2}).eps(adamOptions.eps);
    o.weight_decay(adamOptions.weightDecay).amsgrad(adamOptions.amsgrad);
  }
  for (const auto& [name, state] : rng)
    if (const auto device = generatorDevice(name)) {
      at::Generator gen = torch::globalContext().defaultGenerator(*device);
      gen.set_state(state);
    }
}

bool isLegacyCheckpoint(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    const auto records = reader.getAllRecords();
    return std::any_of(records.begin(), records.end(), isTorchScriptRecord);
  } catch (const c10::Error&) {
    return false;
  }
}

} // namespace splitseg::checkpoint
