#include "core/io/IsolatedRead.h"
#include "core/base/Error.h"
#include "core/base/Printable.h"
#include "core/volume/GeometryCheck.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

namespace splitseg::io {

namespace {
// tests/fuzz runs the sanitizers with this exit code, so a finding in the child is not mistaken
// for a library's crash (see fuzzFinding below).
constexpr int kSanitizerExit = 86;
thread_local const std::atomic<bool>* t_abandon = nullptr;

// Child exit codes of our own.
constexpr int kWriteFailed = 3;

// Appends the child's result to the anonymous memory file.
class Writer {
public:
  explicit Writer(int fd) : fd_(fd) {}
  void bytes(const void* p, std::size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd_, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) _exit(kWriteFailed);  // no space for the result: the parent reports it
      c += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  template <typename T> void pod(const T& v) { bytes(&v, sizeof v); }
  void text(const std::string& s) {
    pod(static_cast<std::uint64_t>(s.size()));
    bytes(s.data(), s.size());
  }

private:
  int fd_;
};

// Reads the result back in the parent; never past what the child wrote.
class Reader {
public:
  Reader(int fd, const std::string& path) : fd_(fd), path_(path) {
    const off_t end = ::lseek(fd, 0, SEEK_END);
    size_ = end < 0 ? 0 : static_cast<std::uint64_t>(end);
  }
  void bytes(void* p, std::uint64_t n) {
    if (n > size_ - pos_) throw FormatError(path_, "the reader process returned an incomplete result");
    char* c = static_cast<char*>(p);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, c, n, static_cast<off_t>(pos_));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw FormatError(path_, "the reader process returned an incomplete result");
      c += r;
      pos_ += static_cast<std::uint64_t>(r);
      n -= static_cast<std::uint64_t>(r);
    }
  }
  template <typename T> T pod() {
    T v{};
    bytes(&v, sizeof v);
    return v;
  }
  std::string text() {
    const auto n = pod<std::uint64_t>();
    if (n > size_ - pos_) throw FormatError(path_, "the reader process returned an incomplete result");
    std::string s(n, '\0');
    bytes(s.data(), n);
    return s;
  }
  std::uint64_t left() const { return size_ - pos_; }
  std::uint64_t size() const { return size_; }

private:
  int fd_;
  const std::string& path_;
  std::uint64_t size_ = 0, pos_ = 0;
};

void putGeometry(Writer& w, const Geometry& g) {
  w.pod(g.size);
  w.pod(g.spacing);
  w.pod(g.origin);
  w.pod(g.direction);
}

Geometry getGeometry(Reader& r) {
  Geometry g;
  g.size = r.pod<decltype(g.size)>();
  g.spacing = r.pod<decltype(g.spacing)>();
  g.origin = r.pod<decltype(g.origin)>();
  g.direction = r.pod<decltype(g.direction)>();
  return g;
}

// The error the child caught, with its type: 'I' IoError, 'F' FormatError, 'A' InvalidArgument,
// 'E' any other.
void putError(int fd, char kind, const std::string& path, const std::string& message) {
  if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) _exit(kWriteFailed);
  Writer w(fd);
  w.pod('E');
  w.pod(kind);
  w.text(path);
  w.text(message);
}

[[noreturn]] void rethrow(Reader& r) {
  const char kind = r.pod<char>();
  const std::string path = r.text(), message = r.text();
  // IoError's message already starts with "path: "; the constructor adds it again.
  const std::string prefix = printable(path) + ": ";
  const std::string what = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
  switch (kind) {
  case 'I': throw IoError(path, what);
  case 'F': throw FormatError(path, what);
  case 'A': throw InvalidArgument(message);
  default: throw Error(message);
  }
}

std::string signalName(int sig) {
  const char* d = ::strsignal(sig);
  return d ? std::string(d) : "signal " + std::to_string(sig);
}

class MemFile {
public:
  MemFile() : fd_(::memfd_create("splitseg-read", MFD_CLOEXEC)) {}
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  int fd() const { return fd_; }

private:
  int fd_;
};

// Runs work in a child that writes 'O' + its result into mem; returns a Reader positioned after
// the 'O', or throws the child's error, a crash or a timeout as one line naming path.
void runChild(const std::string& path, const std::function<void(Writer&)>& work, const MemFile& mem) {
  // The child may grow by what the machine has free, no more: a header that asks for terabytes
  // gets bad_alloc there (one FormatError line) instead of pushing the machine into swap. The
  // limit is on address space, so it counts from what is already mapped (CUDA and ASan map much).
  std::uint64_t addressLimit = 0;
  {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages = 0;
    const std::uint64_t growth = readMemoryBytes();
    if (statm >> pages) addressLimit = pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) + growth;
  }
  // One fork at a time: ITK registers fork handlers that stop and restart its thread pool, and
  // two threads forking at once make those handlers join the same threads (std::terminate).
  static std::mutex forkMutex;
  pid_t pid = -1;
  {
    std::lock_guard<std::mutex> lock(forkMutex);
    pid = ::fork();
  }
  if (pid < 0) throw IoError(path, std::string("cannot start a reader process: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: only this thread exists; it reads, writes its result and leaves without
    // running the parent's exit handlers.
    if (addressLimit > 0) {
      struct rlimit now {};
      if (::getrlimit(RLIMIT_AS, &now) == 0 && (now.rlim_cur == RLIM_INFINITY || now.rlim_cur > addressLimit)) {
        now.rlim_cur = addressLimit;
        ::setrlimit(RLIMIT_AS, &now);
      }
    }
    // A library's crash must end the child by its signal: handlers inherited from the parent
    // (a fuzzer's, a crash reporter's) would otherwise treat it as the parent's own.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP})
      ::signal(sig, SIG_DFL);
    // Library noise (GDCM's assert text, ITK warnings) stays out of the one line the parent
    // reports and out of the CLI's JSON on stdout.
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    Writer w(mem.fd());
    try {
      w.pod('O');
      work(w);
    } catch (const InvalidArgument& e) {
      putError(mem.fd(), 'A', "", e.what());
    } catch (const FormatError& e) {
      putError(mem.fd(), 'F', e.path(), e.what());
    } catch (const IoError& e) {
      putError(mem.fd(), 'I', e.path(), e.what());
    } catch (const std::bad_alloc&) {
      putError(mem.fd(), 'F', path, path + ": not enough memory to read it (does the header claim too much?)");
    } catch (const std::exception& e) {
      putError(mem.fd(), 'F', path, path + ": cannot read: " + e.what());
    } catch (...) {
      putError(mem.fd(), 'F', path, path + ": cannot read it");
    }
    _exit(0);
  }
  using Clock = std::chrono::steady_clock;
  const double limit = readTimeoutSeconds();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw IoError(path, std::string("lost the reader process: ") + std::strerror(errno));
    if (t_abandon && t_abandon->load()) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      throw Cancelled();
    }
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", limit);
      throw FormatError(path, std::string("reading did not finish within ") + secs +
                                  " s and was stopped (a corrupt or crafted file can make the image library loop; "
                                  "SPLITSEG_READ_TIMEOUT sets the limit)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (WIFSIGNALED(status))
    throw FormatError(path, "the image library crashed reading it (" + signalName(WTERMSIG(status)) +
                                "); the file is corrupt or crafted");
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSanitizerExit) {
#ifdef SPLITSEG_FUZZING
    std::abort();  // a sanitizer finding in our reader code: the fuzzer must see it
#endif
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw FormatError(path, "the reader process failed (exit " + std::to_string(WEXITSTATUS(status)) +
                                "): the file is corrupt, crafted or larger than memory allows");
}

template <typename T>
T isolated(const std::string& path, const std::function<T()>& read, const std::function<void(Writer&, const T&)>& put,
           const std::function<T(Reader&)>& get) {
  if (!readIsolationEnabled()) return read();
  MemFile mem;
  if (mem.fd() < 0) throw IoError(path, std::string("cannot start a reader process: ") + std::strerror(errno));
  runChild(path, [&](Writer& w) { put(w, read()); }, mem);
  Reader r(mem.fd(), path);
  if (r.pod<char>() == 'E') rethrow(r);
  T out = get(r);
  if (r.left() != 0) throw FormatError(path, "the reader process returned more than it read");
  return out;
}
} // namespace

ReadCancelScope::ReadCancelScope(const std::atomic<bool>* abandon) : previous_(t_abandon) { t_abandon = abandon; }
ReadCancelScope::~ReadCancelScope() { t_abandon = previous_; }

bool readIsolationEnabled() {
  const char* v = std::getenv("SPLITSEG_READ_ISOLATION");
  return !(v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0));
}

double readTimeoutSeconds() {
  if (const char* v = std::getenv("SPLITSEG_READ_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && s > 0 && s < 1e6) return s;
  }
  return 300.0;
}

namespace {

// The child's result for a volume: 'O', the grid, the voxel count and the pixel type at the start,
// the floats from kVoxelsAt (page-aligned, so the child maps them there).
constexpr std::uint64_t kVoxelsAt = 1 << 16;
constexpr std::size_t kMaxPixelTypeText = 64;

class LocalSink : public VoxelSink {
public:
  float* start(const Geometry& g) override {
    volume = Volume(g);
    return volume.data();
  }
  void setPixelType(const std::string& t) override { volume.setPixelType(t); }
  Volume volume;
};

class SharedSink : public VoxelSink {
public:
  SharedSink(Writer& w, int fd, const std::string& path) : w_(w), fd_(fd), path_(path) {}
  float* start(const Geometry& g) override {
    if (started_) throw Error(path_ + ": the reader started a volume twice");
    started_ = true;
    const auto n = static_cast<std::uint64_t>(g.voxelCount());
    putGeometry(w_, g);
    w_.pod(n);
    if (n == 0) return nullptr;
    bytes_ = n * sizeof(float);
    if (::ftruncate(fd_, static_cast<off_t>(kVoxelsAt + bytes_)) != 0)
      throw FormatError(path_, std::string("no memory for its voxels: ") + std::strerror(errno));
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(kVoxelsAt));
    if (p == MAP_FAILED) throw FormatError(path_, std::string("no memory for its voxels: ") + std::strerror(errno));
    return static_cast<float*>(p);
  }
  void setPixelType(const std::string& t) override { pixelType_ = t.substr(0, kMaxPixelTypeText); }
  bool started() const { return started_; }
  const std::string& pixelType() const { return pixelType_; }

private:
  Writer& w_;
  int fd_;
  const std::string& path_;
  bool started_ = false;
  std::uint64_t bytes_ = 0;
  std::string pixelType_;
};

// Takes the child's floats over in pieces, freeing each piece of shared memory once copied: the
// volume is never held twice.
std::vector<float> takeVoxels(int fd, std::uint64_t n, const std::string& path) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(n));
  constexpr std::uint64_t kPiece = std::uint64_t{64} << 20;
  const std::uint64_t bytes = n * sizeof(float);
  for (std::uint64_t at = 0; at < bytes; at += kPiece) {
    const std::uint64_t len = std::min(kPiece, bytes - at);
    out.resize(out.size() + static_cast<std::size_t>(len / sizeof(float)));
    char* dst = reinterpret_cast<char*>(out.data()) + at;
    for (std::uint64_t got = 0; got < len;) {
      const ssize_t r = ::pread(fd, dst + got, len - got, static_cast<off_t>(kVoxelsAt + at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw FormatError(path, "the reader process returned an incomplete volume");
      got += static_cast<std::uint64_t>(r);
    }
    // Not supported everywhere (then the memory goes when the file closes): no error.
    (void)::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(kVoxelsAt + at),
                      static_cast<off_t>(len));
  }
  return out;
}

} // namespace

Volume isolatedVolume(const std::string& path, const std::function<void(VoxelSink&)>& read) {
  if (!readIsolationEnabled()) {
    LocalSink sink;
    read(sink);
    return std::move(sink.volume);
  }
  MemFile mem;
  if (mem.fd() < 0) throw IoError(path, std::string("cannot start a reader process: ") + std::strerror(errno));
  runChild(path,
           [&](Writer& w) {
             SharedSink sink(w, mem.fd(), path);
             read(sink);
             if (!sink.started()) throw FormatError(path, "the reader returned no volume");
             w.text(sink.pixelType());
           },
           mem);
  Reader r(mem.fd(), path);
  if (r.pod<char>() == 'E') rethrow(r);
  const Geometry g = getGeometry(r);
  const auto n = r.pod<std::uint64_t>();
  const std::string pixelType = r.text();
  std::int64_t count = -1;
  try {
    count = g.voxelCount();
  } catch (const Error&) {
  }
  const std::uint64_t end = n == 0 ? r.left() : 0;
  if (count < 0 || static_cast<std::uint64_t>(count) != n || pixelType.size() > kMaxPixelTypeText || end != 0 ||
      (n > 0 && r.size() != kVoxelsAt + n * sizeof(float)))
    throw FormatError(path, "the reader process returned an inconsistent volume");
  Volume v(g, takeVoxels(mem.fd(), n, path));
  v.setPixelType(pixelType);
  return v;
}

Volume isolatedVolume(const std::string& path, const std::function<Volume()>& read) {
  return isolatedVolume(path, [&](VoxelSink& sink) {
    const Volume v = read();
    float* dst = sink.start(v.geometry());
    if (!v.voxels().empty()) std::memcpy(dst, v.data(), v.voxels().size() * sizeof(float));
    sink.setPixelType(v.pixelType());
  });
}

VolumeSummary isolatedSummary(const std::string& path, const std::function<VolumeSummary()>& read) {
  return isolated<VolumeSummary>(
      path, read,
      [](Writer& w, const VolumeSummary& v) {
        putGeometry(w, v.header.geometry);
        w.text(v.header.pixelType);
        w.text(v.header.format);
        w.pod(v.min);
        w.pod(v.max);
        w.pod(v.nonFinite);
        w.text(v.nonFiniteNote);
      },
      [](Reader& r) {
        VolumeSummary v;
        v.header.geometry = getGeometry(r);
        v.header.pixelType = r.text();
        v.header.format = r.text();
        v.min = r.pod<float>();
        v.max = r.pod<float>();
        v.nonFinite = r.pod<std::int64_t>();
        v.nonFiniteNote = r.text();
        return v;
      });
}

ImageHeader isolatedHeader(const std::string& path, const std::function<ImageHeader()>& read) {
  return isolated<ImageHeader>(
      path, read,
      [](Writer& w, const ImageHeader& h) {
        putGeometry(w, h.geometry);
        w.text(h.pixelType);
        w.text(h.format);
      },
      [](Reader& r) {
        ImageHeader h;
        h.geometry = getGeometry(r);
        h.pixelType = r.text();
        h.format = r.text();
        return h;
      });
}

std::vector<DicomSeriesInfo> isolatedSeriesList(const std::string& path,
                                                const std::function<std::vector<DicomSeriesInfo>()>& read) {
  return isolated<std::vector<DicomSeriesInfo>>(
      path, read,
      [](Writer& w, const std::vector<DicomSeriesInfo>& list) {
        w.pod(static_cast<std::uint64_t>(list.size()));
        for (const auto& s : list) {
          w.text(s.uid);
          w.text(s.description);
          w.text(s.modality);
          w.pod(static_cast<std::uint64_t>(s.sliceCount));
        }
      },
      [&](Reader& r) {
        const auto n = r.pod<std::uint64_t>();
        if (n > r.left()) throw FormatError(path, "the reader process returned an inconsistent list");
        std::vector<DicomSeriesInfo> list(n);
        for (auto& s : list) {
          s.uid = r.text();
          s.description = r.text();
          s.modality = r.text();
          s.sliceCount = r.pod<std::uint64_t>();
        }
        return list;
      });
}

} // namespace splitseg::io
