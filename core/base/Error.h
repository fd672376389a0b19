#pragma once
// Typed errors of the engine. Every message names what failed (file, stage, device) so a
// front end can show it as is: one line, with what came from files escaped (Printable.h).
#include <stdexcept>
#include <string>

namespace splitseg {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message);
};

// Bad arguments or configuration given by the user (unknown stage, bad size, ...).
class InvalidArgument : public Error { using Error::Error; };

// A file could not be read or written.
class IoError : public Error {
public:
  IoError(const std::string& path, const std::string& what);
  const std::string& path() const { return path_; }
private:
  std::string path_;
};

// A file was read but its content is wrong (truncated, bad header, wrong dimension, ...).
class FormatError : public IoError { using IoError::IoError; };

// A device named by the user does not exist or cannot run anything (planning-only).
class DeviceError : public Error { using Error::Error; };

// A step ran out of memory. Names the device and the stage that was running.
class OutOfMemoryError : public Error {
public:
  OutOfMemoryError(std::string device, std::string stage, const std::string& detail);
  const std::string& device() const { return device_; }
  const std::string& stage() const { return stage_; }
private:
  std::string device_;
  std::string stage_;
};

// Work stopped because the user asked for it.
class Cancelled : public Error {
public:
  Cancelled() : Error("cancelled") {}
};

} // namespace splitseg
