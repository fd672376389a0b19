// An evaluation's summary.json (Evaluate dataset's Open results…): whatever the file holds, the
// reader refuses it with splitseg::Error or returns what it describes.
#include "FuzzSupport.h"
#include "core/evaluate/DatasetEvaluation.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = splitseg::fuzz::writeInput("summary.json", data, size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::evaluate::readEvaluation(path); });
  return 0;
}
