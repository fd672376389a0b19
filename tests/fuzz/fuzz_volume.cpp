// One libFuzzer target per volume format: FUZZ_NAME is the file name the input is written
// to (its ending picks the reader), e.g. "in.nii", "in.nrrd", "in.mha".
#include "FuzzSupport.h"
#include "core/io/VolumeReader.h"

#include <itkObject.h>

#ifndef FUZZ_NAME
#error "FUZZ_NAME must name the input file"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  itk::Object::GlobalWarningDisplayOff();
  const std::string path = splitseg::fuzz::writeInput(FUZZ_NAME, data, size);
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readHeader(path); });
  splitseg::fuzz::expectOnlyErrors([&] { splitseg::io::readVolume(path); });
  return 0;
}
