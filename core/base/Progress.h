#pragma once
// Long work reports progress through this interface. The GUI adapts it to queued Qt
// signals; the CLI prints JSON lines or a bar.
#include <string>

namespace splitseg {

class ProgressSink {
public:
  virtual ~ProgressSink() = default;
  // fraction in [0,1]; message says what is being done.
  virtual void progress(double fraction, const std::string& message) = 0;
};

class NullProgress final : public ProgressSink {
public:
  void progress(double, const std::string&) override {}
};

} // namespace splitseg
