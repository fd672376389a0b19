#pragma once
// Reads a StagedNetwork's layer structure from its modules and stage specs into the plain data the
// planner works on (core/placement never sees a LibTorch module).
#include "core/planner/NetworkStructure.h"

#include <map>
#include <string>

namespace splitseg::model {

class StagedNetwork;
struct UNet3dOptions;

// Walks each stage module's leaf submodules (Conv3d, ConvTranspose3d, Instance/BatchNorm3d,
// ReLU) in registration order. Operations a stage performs functionally are inferred from its
// StageSpec: a level increase over its first input is a max-pool, a second input a concat after
// the up-sampling. Dropout is functional too: its probability per stage comes from `dropout`,
// or, when empty and the network is the built-in UNet3d, from the U-Net's options.
planner::NetworkStructure networkStructure(StagedNetwork& network,
                                             const std::map<std::string, double>& dropout = {});
// Builds the U-Net (weights on CPU; ~90 MB for the seed) just to read its structure.
planner::NetworkStructure unetStructure(const UNet3dOptions& options);

} // namespace splitseg::model
