#include "core/engine/NetworkFactory.h"
#include "core/base/Error.h"
#include "core/model/UNet3d.h"

namespace splitseg::engine {

std::shared_ptr<model::StagedNetwork> createNetwork(const std::string& architecture,
                                                    const std::string& optionsJson) {
  if (architecture == "unet3d") {
    auto net = model::UNet3d(model::UNet3dOptions::fromJson(optionsJson));
    return net.ptr();
  }
  throw InvalidArgument("unknown architecture '" + architecture + "'");
}

} // namespace splitseg::engine
