#pragma once
#include "core/model/StagedNetwork.h"

#include <memory>
#include <string>

namespace splitseg::engine {

// Builds a network from an architecture name ("unet3d") and its options JSON.
std::shared_ptr<model::StagedNetwork> createNetwork(const std::string& architecture,
                                                    const std::string& optionsJson);

} // namespace splitseg::engine
