#include "core/model/NetworkStructureOf.h"
#include "core/base/Error.h"
#include "core/model/UNet3d.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/instancenorm.h>

#include <algorithm>

namespace splitseg::model {

using planner::LayerKind;
using planner::LayerSpec;
using planner::NetworkStructure;
using planner::StageStructure;

namespace {

// Only cubic, explicit kernel/stride/padding are modelled; anything else is refused rather than
// silently mis-planned.
template <typename Options>
void readConv(const Options& o, LayerSpec& l, const std::string& stage) {
  const auto& k = *o.kernel_size();
  const auto& s = *o.stride();
  if (k[0] != k[1] || k[0] != k[2] || s[0] != s[1] || s[0] != s[2] || o.groups() != 1)
    throw InvalidArgument("planner: stage " + stage + " has a non-cubic or grouped convolution");
  l.inChannels = o.in_channels();
  l.outChannels = o.out_channels();
  l.kernel = static_cast<int>(k[0]);
  l.stride = static_cast<int>(s[0]);
}

int convPadding(const torch::nn::detail::conv_padding_t<3>& p, int kernel, const std::string& stage) {
  if (auto* a = std::get_if<torch::ExpandingArray<3>>(&p)) {
    if ((**a)[0] != (**a)[1] || (**a)[0] != (**a)[2])
      throw InvalidArgument("planner: stage " + stage + " has non-cubic padding");
    return static_cast<int>((**a)[0]);
  }
  if (std::holds_alternative<torch::enumtype::kSame>(p)) return (kernel - 1) / 2;
  return 0;  // kValid
}

void countParameters(const torch::nn::Module& m, LayerSpec& l) {
  for (const auto& p : m.parameters(/*recurse=*/false)) {
    l.parameters += p.numel();
    l.largestParameter = std::max<std::int64_t>(l.largestParameter, p.numel());
  }
}

} // namespace

NetworkStructure networkStructure(StagedNetwork& net, const std::map<std::string, double>& dropoutIn) {
  NetworkStructure ns;
  ns.inChannels = net.inChannels();
  ns.outChannels = net.outChannels();
  ns.sizeDivisor = net.sizeDivisor();
  const auto specs = net.stageSpecs();

  // The U-Net drops out after each pool: stage at level l uses dropout[l-1] (last value repeated).
  std::vector<double> unetDropout;
  if (auto* unet = dynamic_cast<UNet3dImpl*>(&net)) {
    unetDropout = unet->options().dropout();
    unetDropout.resize(static_cast<std::size_t>(unet->options().depth() - 1),
                       unetDropout.empty() ? 0.0 : unetDropout.back());
  }

  std::map<std::string, int> levelOf{{kInput, 0}};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    StageStructure st;
    st.name = spec.name;
    st.inputs = spec.inputs;
    const int inLevel = levelOf.count(spec.inputs.at(0)) ? levelOf[spec.inputs.at(0)] : 0;
    if (spec.level > inLevel) {
      LayerSpec pool;
      pool.kind = LayerKind::MaxPool;
      pool.kernel = pool.stride = 1 << (spec.level - inLevel);
      st.layers.push_back(pool);
      auto it = dropoutIn.find(spec.name);
      double p = 0;
      if (it != dropoutIn.end()) p = it->second;
      else if (static_cast<std::size_t>(spec.level) <= unetDropout.size()) p = unetDropout[spec.level - 1];
      if (p > 0) {
        LayerSpec d;
        d.kind = LayerKind::Dropout;
        d.p = p;
        st.layers.push_back(d);
      }
    }
    bool concatPending = spec.inputs.size() > 1;
    auto module = net.stageModule(i);
    for (const auto& m : module->modules(/*include_self=*/false)) {
      LayerSpec l;
      if (auto* c = m->as<torch::nn::Conv3dImpl>()) {
        l.kind = LayerKind::Conv;
        l.followsWhole = m->as<shard::HaloConv3dImpl>() != nullptr;
        readConv(c->options, l, spec.name);
        l.padding = convPadding(c->options.padding(), l.kernel, spec.name);
      } else if (auto* t = m->as<torch::nn::ConvTranspose3dImpl>()) {
        l.kind = LayerKind::ConvTranspose;
        readConv(t->options, l, spec.name);
        l.padding = convPadding(t->options.padding(), l.kernel, spec.name);
      } else if (auto* n = m->as<torch::nn::InstanceNorm3dImpl>()) {
        l.kind = LayerKind::Norm;
        l.inChannels = l.outChannels = n->options.num_features();
        l.outputIsView = true;  // at::instance_norm returns out.view(input.sizes())
      } else if (auto* b = m->as<torch::nn::BatchNorm3dImpl>()) {
        l.kind = LayerKind::Norm;
        l.inChannels = l.outChannels = b->options.num_features();
      } else if (auto* r = m->as<torch::nn::ReLUImpl>()) {
        l.kind = LayerKind::ReLU;
        l.inplace = r->options.inplace();
      } else if (auto* pool = m->as<torch::nn::MaxPool3dImpl>()) {
        l.kind = LayerKind::MaxPool;
        l.kernel = static_cast<int>((*pool->options.kernel_size())[0]);
        l.stride = static_cast<int>((*pool->options.stride())[0]);
      } else if (auto* dm = m->as<torch::nn::DropoutImpl>()) {
        l.kind = LayerKind::Dropout;
        l.p = dm->options.p();
      } else if (auto* d3 = m->as<torch::nn::Dropout3dImpl>()) {
        l.kind = LayerKind::Dropout;
        l.p = d3->options.p();
      } else {
        // Containers (Sequential) hold the leaves visited next; an unknown leaf would be
        // mis-planned, so it is refused.
        if (!m->children().empty()) continue;
        throw InvalidArgument("planner: stage " + spec.name + " has an unsupported layer " + m->name());
      }
      countParameters(*m, l);
      st.parameters += l.parameters;
      st.layers.push_back(l);
      // A decoder up-samples its first input, then joins the skip: the concat follows the
      // first transposed convolution.
      if (concatPending && l.kind == LayerKind::ConvTranspose) {
        LayerSpec cat;
        cat.kind = LayerKind::Concat;
        st.layers.push_back(cat);
        concatPending = false;
      }
    }
    if (concatPending) {  // no up-sampling: join inputs first
      LayerSpec cat;
      cat.kind = LayerKind::Concat;
      st.layers.insert(st.layers.begin(), cat);
    }
    levelOf[spec.name] = spec.level;
    ns.stages.push_back(std::move(st));
  }
  return ns;
}

NetworkStructure unetStructure(const UNet3dOptions& options) {
  UNet3d net(options);
  return networkStructure(*net);
}

} // namespace splitseg::model
