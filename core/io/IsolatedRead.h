#pragma once
// Reading untrusted images in a child process. ITK's and GDCM's readers are libraries we cannot
// fix: Debian's GDCM keeps its assert()s (a crafted DICOM file aborts the process) and MetaIO can
// loop forever on a malformed header (both found by tests/fuzz). Every read that hands a file to
// them therefore runs in a fork()ed child with a time limit; the child writes its result into an
// anonymous memory file and exits. A crash, abort or hang there becomes one FormatError line
// naming the file; the caller's process, its windows and its training run go on.
//
// The child may grow by the memory the machine has free (MemAvailable), or by
// SPLITSEG_READ_MEMORY bytes when that is lower: a header asking for more gets bad_alloc there.
// SPLITSEG_READ_ISOLATION=off reads in the process itself (debugging); SPLITSEG_READ_TIMEOUT
// sets the time limit in seconds (default 300: a 2000-slice DICOM series on a network disk).
#include "core/io/DicomSeries.h"
#include "core/io/VolumeReader.h"

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace splitseg::io {

bool readIsolationEnabled();

// While one lives on a thread, isolated reads on that thread stop within ~20 ms of *abandon
// becoming true: the child is killed and Cancelled is thrown. The workstation abandons a read
// that a newer Open superseded, so superseded reads never pile up.
class ReadCancelScope {
public:
  explicit ReadCancelScope(const std::atomic<bool>* abandon);
  ~ReadCancelScope();
  ReadCancelScope(const ReadCancelScope&) = delete;
  ReadCancelScope& operator=(const ReadCancelScope&) = delete;

private:
  const std::atomic<bool>* previous_;
};

double readTimeoutSeconds();

// Where a reader puts a volume: it names the grid once and gets the floats to fill. In a child
// they are shared memory the parent takes over piece by piece, so a volume is held once in the
// child and once in the parent, never twice in either (the child's own copy and the result's
// transfer were 2x the float volume).
class VoxelSink {
public:
  virtual ~VoxelSink() = default;
  // geometry passed geometryProblem() already; returns geometry.voxelCount() floats to fill.
  virtual float* start(const Geometry& geometry) = 0;
  virtual void setPixelType(const std::string& pixelType) = 0;
};

// Each runs `read` in a child (or here, when isolation is off) and returns its result, or
// rethrows its error with the same type (IoError, FormatError, InvalidArgument) and message.
Volume isolatedVolume(const std::string& path, const std::function<void(VoxelSink&)>& read);
Volume isolatedVolume(const std::string& path, const std::function<Volume()>& read);
VolumeSummary isolatedSummary(const std::string& path, const std::function<VolumeSummary()>& read);
ImageHeader isolatedHeader(const std::string& path, const std::function<ImageHeader()>& read);
std::vector<DicomSeriesInfo> isolatedSeriesList(const std::string& path,
                                                const std::function<std::vector<DicomSeriesInfo>()>& read);

} // namespace splitseg::io
