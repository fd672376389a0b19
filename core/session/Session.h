#pragma once
// A `.splitseg` session: everything needed to come back to a piece of work the next day —
// the opened volumes and dataset, the network (architecture + options), its placement, the
// training settings, the checkpoint in use and the GUI's view settings. JSON, versioned.
//
// Paths are stored relative to the session file's folder where that is possible (so a project
// folder can be moved or shared) and are absolute in memory. Loading never fails because a
// referenced file is gone: the entry is kept, marked missing, and a message says which; only an
// unreadable or malformed session file itself throws.
//
// Used by the CLI (--session on train/infer, `session` command) and by the GUI (File > Save /
// Open Session): the GUI fills `view` with its own keys; core does not interpret them.
#include "core/run/RunSpec.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::session {

// 2: the run description under "run"; 1 (still read): loose network/placement/training keys.
constexpr int kSessionVersion = 2;
inline const char* const kSessionExtension = ".splitseg";

struct VolumeRef {
  std::string path;            // absolute in memory
  std::string role = "image";  // image | label | prediction
  std::string name;            // display name (empty: file name)
  bool missing = false;        // set by load: the file was not found
};

struct Session {
  int version = kSessionVersion;
  std::vector<VolumeRef> volumes;
  // The run: network, placement, precision, patch, batch, schedule, preprocessing, data
  // source (dataset folder, image/label), checkpoint. The same value the CLI and the GUI run.
  run::RunSpec run;
  bool datasetMissing = false;         // run.data.dataset not found by load
  bool checkpointMissing = false;      // run.checkpoint not found by load
  nlohmann::json view = nlohmann::json::object();       // GUI view settings, opaque to core

  // The first volume with this role, or nullptr.
  const VolumeRef* firstVolume(const std::string& role) const;
};

// JSON text <-> Session. `baseDir` is the session file's folder: paths are written relative to
// it (when the file lies under it or near it) and read back against it. A path or name that is
// not UTF-8 (JSON holds nothing else) throws InvalidArgument naming it, or with `forDisplay` is
// written escaped (printable) for a person to read.
nlohmann::json toJson(const Session& s, const std::string& baseDir, bool forDisplay = false);
// Throws InvalidArgument naming the field for wrong types, unknown keys or a newer version.
Session fromJson(const nlohmann::json& j, const std::string& baseDir);

struct LoadResult {
  Session session;
  std::vector<std::string> warnings;  // one line per missing file or ignored entry
};

// Reads a session file. Throws IoError when unreadable, FormatError when not a session; a
// missing volume, dataset or checkpoint only adds a warning (and sets its `missing` flag).
LoadResult loadSession(const std::string& path);
// Writes atomically (temporary file + rename).
void saveSession(const Session& s, const std::string& path);

} // namespace splitseg::session
