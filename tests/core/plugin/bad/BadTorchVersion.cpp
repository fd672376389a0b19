// A plugin built against another LibTorch: refused before any LibTorch object crosses over.
#include "plugins/PluginApi.h"

namespace {
std::shared_ptr<splitseg::model::StagedNetwork> create(const std::string&) { return nullptr; }
splitseg::plugin::ArchitecturePlugin makeDescriptor() {
  splitseg::plugin::ArchitecturePlugin p;
  p.name = "old-torch-net";
  p.create = &create;
  p.torchVersion = "1.13.0";
  return p;
}
const splitseg::plugin::ArchitecturePlugin kPlugin = makeDescriptor();
} // namespace

extern "C" const splitseg::plugin::ArchitecturePlugin* SPLITSEG_PLUGIN_ENTRY() { return &kPlugin; }
