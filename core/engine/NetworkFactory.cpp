#include "core/engine/NetworkFactory.h"
#include "core/plugin/PluginRegistry.h"

namespace splitseg::engine {

// Every architecture (the built-in unet3d included) comes from the plugin registry, so
// checkpoints of plugin networks load like the U-Net's.
std::shared_ptr<model::StagedNetwork> createNetwork(const std::string& architecture,
                                                    const std::string& optionsJson) {
  return plugin::PluginRegistry::instance().create(architecture, optionsJson);
}

} // namespace splitseg::engine
