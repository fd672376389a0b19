// Checkpoints (core/checkpoint/CheckpointFile.h): the zip container, LibTorch's unpickler, every
// value check, then loading into a network and an optimizer. Only splitseg::Error may come out.
// The first input byte picks what the rest is:
//   even: a whole checkpoint file, as a user would be sent one;
//   odd:  the pickle alone, stored in a well-formed archive (CheckpointArchive.h).
#include "CheckpointArchive.h"
#include "FuzzSupport.h"
#include "core/checkpoint/CheckpointFile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static splitseg::fuzz::CheckpointTarget target;
  const std::vector<char> bytes = (data[0] & 1) ? splitseg::fuzz::archiveAround(data + 1, size - 1)
                                                : std::vector<char>(data + 1, data + size);
  splitseg::fuzz::expectOnlyErrors([&] {
    const auto file = splitseg::checkpoint::CheckpointFile::parse(bytes, "fuzz.ckpt");
    file.loadInto(*target.net, &target.adam, "fuzz.ckpt");
  });
  return 0;
}
