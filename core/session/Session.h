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
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace splitseg::session {

constexpr int kSessionVersion = 1;
inline const char* const kSessionExtension = ".splitseg";

struct VolumeRef {
  std::string path;            // absolute in memory
  std::string role = "image";  // image | label | prediction
  std::string name;            // display name (empty: file name)
  bool missing = false;        // set by load: the file was not found
};

struct TrainingSettings {
  std::int64_t steps = 100;
  int epochs = 0;
  std::int64_t stepsPerEpoch = 50;
  int batch = 1;
  double learningRate = 1e-3;
  std::uint64_t seed = 0;
  std::array<std::int64_t, 3> patch{64, 64, 64};  // x,y,z
  std::string precision = "fp32";                  // as --precision: fp32, bf16, bf16:enc0,dec0
  std::vector<std::string> recompute;              // stages with activation checkpointing
  std::string intensity = "ct-soft-tissue";        // intensity preset
  std::array<double, 3> spacing{0, 0, 0};          // target spacing mm (0: keep)
  std::int64_t validateEvery = 0;
  std::int64_t checkpointEvery = 0;
  std::string cpuBudget;                           // "2GiB"; empty: none
};

struct Session {
  int version = kSessionVersion;
  std::vector<VolumeRef> volumes;
  std::string dataset;                 // dataset folder (MSD / nnU-Net raw); empty: none
  bool datasetMissing = false;
  std::string architecture = "unet3d";
  nlohmann::json options = nlohmann::json::object();    // network options (architecture's JSON)
  nlohmann::json placement = nlohmann::json::object();  // placement::Placement JSON; empty: default
  TrainingSettings training;
  std::string checkpoint;              // checkpoint in use (train writes it, infer reads it)
  bool checkpointMissing = false;
  nlohmann::json view = nlohmann::json::object();       // GUI view settings, opaque to core

  // The first volume with this role, or nullptr.
  const VolumeRef* firstVolume(const std::string& role) const;
};

// JSON text <-> Session. `baseDir` is the session file's folder: paths are written relative to
// it (when the file lies under it or near it) and read back against it.
nlohmann::json toJson(const Session& s, const std::string& baseDir);
// Throws InvalidArgument for wrong types or a newer version; unknown keys are ignored.
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
