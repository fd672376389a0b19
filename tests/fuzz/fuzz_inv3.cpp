// InVesalius .inv3 projects (gzip'd tar + plists).
#include "FuzzSupport.h"
#include "core/io/InVesalius.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = splitseg::fuzz::writeInput("in.inv3", data, size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readInVesalius(path); });
  return 0;
}
