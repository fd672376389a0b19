// A plugin whose factory throws and whose default options are fine: create() must report it.
#include "plugins/PluginApi.h"

#include <stdexcept>

namespace {
std::shared_ptr<splitseg::model::StagedNetwork> create(const std::string&) {
  throw std::runtime_error("this network is broken on purpose");
}
splitseg::plugin::ArchitecturePlugin makeDescriptor() {
  splitseg::plugin::ArchitecturePlugin p;
  p.name = "throwing-net";
  p.description = "always throws";
  p.create = &create;
  return p;
}
const splitseg::plugin::ArchitecturePlugin kPlugin = makeDescriptor();
} // namespace

extern "C" const splitseg::plugin::ArchitecturePlugin* SPLITSEG_PLUGIN_ENTRY() { return &kPlugin; }
