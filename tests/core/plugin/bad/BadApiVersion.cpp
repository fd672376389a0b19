// A plugin from a future SplitSeg: the registry must refuse it by its API version alone.
#include "plugins/PluginApi.h"

namespace {
splitseg::plugin::ArchitecturePlugin makeDescriptor() {
  splitseg::plugin::ArchitecturePlugin p;
  p.apiVersion = 99;
  p.name = "future-net";
  return p;
}
const splitseg::plugin::ArchitecturePlugin kPlugin = makeDescriptor();
} // namespace

extern "C" const splitseg::plugin::ArchitecturePlugin* SPLITSEG_PLUGIN_ENTRY() { return &kPlugin; }
