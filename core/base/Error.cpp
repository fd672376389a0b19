#include "core/base/Error.h"
#include "core/base/Printable.h"

namespace splitseg {

Error::Error(const std::string& message) : std::runtime_error(printable(message)) {}

IoError::IoError(const std::string& path, const std::string& what)
    : Error(path + ": " + what), path_(path) {}

OutOfMemoryError::OutOfMemoryError(std::string device, std::string stage, const std::string& detail)
    : Error("out of memory on " + device + " in stage " + stage + (detail.empty() ? "" : ": " + detail)),
      device_(std::move(device)), stage_(std::move(stage)) {}

} // namespace splitseg
