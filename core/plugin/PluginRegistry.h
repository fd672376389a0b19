#pragma once
// Every network architecture SplitSeg can build: the built-in 3D U-Net and those contributed
// by plugin shared libraries (plugins/PluginApi.h). The CLI, the GUI and checkpoint loading
// (engine::createNetwork) all go through here, so a plugin architecture is a first-class one.
//
// Loading never throws and never crashes on a bad plugin that follows the dlopen rules: a file
// that is not a library, lacks the entry symbol, has another API version or was built against
// another LibTorch is recorded in failures() with the reason and skipped.
//
// A plugin is code that runs as the user: dlopen runs its static initialisers before SplitSeg
// can read its version or ABI, so those checks protect against mistakes, not against malice.
// What is checked before dlopen: the file is regular, it and its folder belong to the user or
// root and are not writable by group or others, and SPLITSEG_PLUGIN_PATH entries are absolute.
// Install only plugins you trust.
#include "core/model/StagedNetwork.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace splitseg::plugin {

struct ArchitecturePlugin;

struct ArchitectureInfo {
  std::string name;                // "unet3d", "resunet3d"
  std::string description;
  std::string defaultOptionsJson;  // a JSON object
  std::string source;              // "built-in" or the plugin file's path
};

struct PluginFailure {
  std::string path;    // the file (or folder) that failed
  std::string reason;  // one line, shown as is
};

class PluginRegistry {
public:
  // The process-wide registry. On first use it registers the built-ins and scans the default
  // folders (defaultFolders()).
  static PluginRegistry& instance();

  // An empty registry with only the built-ins (tests); scan nothing.
  PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // <exe>/../lib/splitseg/plugins (install and build tree alike), then each folder of
  // SPLITSEG_PLUGIN_PATH (':'-separated).
  static std::vector<std::string> defaultFolders();

  // Loads every *.so in the folder (sorted by name). A missing folder is not an error for the
  // defaults; for a user-added folder it is recorded as a failure. Returns how many loaded.
  int addFolder(const std::string& folder, bool mustExist = true);
  // Loads one plugin file. False (and a failure recorded) when it cannot be used.
  bool loadLibrary(const std::string& path);
  // Registers an architecture compiled into the program (the built-in U-Net goes this way).
  // False (and a failure) when the descriptor is invalid or the name is taken.
  bool registerArchitecture(const ArchitecturePlugin& descriptor, const std::string& source);

  std::vector<ArchitectureInfo> architectures() const;  // sorted by name, built-ins included
  std::vector<PluginFailure> failures() const;
  std::vector<std::string> folders() const;              // scanned so far, in order
  bool has(const std::string& architecture) const;
  ArchitectureInfo info(const std::string& architecture) const;  // throws InvalidArgument when unknown

  // Builds a network; empty options mean the architecture's defaults. Throws InvalidArgument
  // for an unknown architecture (listing the known ones) or options the factory refuses.
  std::shared_ptr<model::StagedNetwork> create(const std::string& architecture, const std::string& optionsJson) const;

private:
  struct Entry;
  bool add(const ArchitecturePlugin& d, const std::string& source, std::string* why);
  void fail(const std::string& path, const std::string& reason);

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Entry>> entries_;
  std::vector<PluginFailure> failures_;
  std::vector<std::string> folders_;
  std::vector<std::string> loadedFiles_;  // canonical paths, so a folder named twice loads once
};

} // namespace splitseg::plugin
