#pragma once
// Conversion of the checkpoints written before version 3 (TorchScript archives) into the
// current format (core/checkpoint/CheckpointFile.h). It needs the network factory to rebuild
// the network the old archive's weights belong to, hence its home in the engine.
#include <string>

namespace splitseg::engine {

// Reads a TorchScript-archive checkpoint (versions 1-2) and writes it in the current format.
// Reading such an archive goes through torch::jit and may run code stored in it: only for files
// the user trusts (splitseg-cli convert-checkpoint says so).
void convertLegacyCheckpoint(const std::string& from, const std::string& to);

} // namespace splitseg::engine
