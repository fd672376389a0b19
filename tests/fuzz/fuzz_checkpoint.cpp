// Checkpoints (core/checkpoint/CheckpointFile.h): the zip container, LibTorch's unpickler, every
// value check, then loading into a network and an optimizer. Only splitseg::Error may come out.
// The first input byte picks what the rest is:
//   even: a whole checkpoint file, as a user would be sent one;
//   odd:  the pickle alone, stored in a well-formed archive (CheckpointArchive.h).
#include "CheckpointArchive.h"
#include "FuzzSupport.h"
#include "core/checkpoint/CheckpointFile.h"

namespace {
// The network a checkpoint is checked against: small enough for many executions per second,
// with parameters, Adam moments and the CPU generator all in play.
struct Target {
  torch::nn::Linear net{torch::nn::LinearOptions(3, 2)};
  torch::optim::Adam adam{net->parameters(), torch::optim::AdamOptions(1e-3)};
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static Target target;
  const std::vector<char> bytes = (data[0] & 1) ? splitseg::fuzz::archiveAround(data + 1, size - 1)
                                                : std::vector<char>(data + 1, data + size);
  splitseg::fuzz::expectOnlyErrors([&] {
    const auto file = splitseg::checkpoint::CheckpointFile::parse(bytes, "fuzz.ckpt");
    file.loadInto(*target.net, &target.adam, "fuzz.ckpt");
  });
  return 0;
}
