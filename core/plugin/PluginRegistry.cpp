#include "core/plugin/PluginRegistry.h"
#include "core/base/Error.h"
#include "core/model/UNet3d.h"
#include "plugins/PluginApi.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace splitseg::plugin {

struct PluginRegistry::Entry {
  ArchitectureInfo info;
  NetworkFactoryFn create = nullptr;
};

namespace {

std::shared_ptr<model::StagedNetwork> createUNet3d(const std::string& optionsJson) {
  return model::UNet3d(model::UNet3dOptions::fromJson(optionsJson.empty() ? "{}" : optionsJson)).ptr();
}

const ArchitecturePlugin& builtinUNet3d() {
  static const std::string defaults = model::UNet3dOptions{}.toJson();
  static const ArchitecturePlugin d = [] {
    ArchitecturePlugin p;
    p.name = "unet3d";
    p.description = "3D U-Net (built-in): two 3x3x3 conv per level, max-pool, transposed-conv up, concatenated skips";
    p.defaultOptionsJson = defaults.c_str();
    p.create = &createUNet3d;
    return p;
  }();
  return d;
}

std::string executableDir() {
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

} // namespace

PluginRegistry::PluginRegistry() {
  std::string why;
  add(builtinUNet3d(), "built-in", &why);
}

namespace {
// Empty when path and its folder are regular/folder, owned by this user or root, and not
// writable by group or others; else the reason in words.
std::string unsafeToLoad(const std::string& path) {
  auto check = [](const fs::path& p, bool folder) -> std::string {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return "cannot inspect " + p.string();
    if (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) return p.string() + " is not a regular file";
    const std::string what = folder ? "its folder " + p.string() : "the file";
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
      return what + " is owned by user " + std::to_string(st.st_uid) + ", not by you or root";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return what + " is writable by other users (mode " + mode + "): anyone could replace it (chmod go-w)";
    }
    return {};
  };
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) return "cannot resolve " + path + ": " + ec.message();
  if (auto why = check(real, false); !why.empty()) return why;
  return check(real.parent_path(), true);
}
} // namespace

PluginRegistry& PluginRegistry::instance() {
  // Built on first use (not at static-init time) so the environment is read when needed.
  static PluginRegistry* registry = [] {
    auto* r = new PluginRegistry();  // never destroyed: plugin networks may outlive main()
    for (const auto& folder : defaultFolders()) {
      // A relative entry would load code from whatever folder SplitSeg happens to start in.
      if (!fs::path(folder).is_absolute()) {
        r->fail(folder, "SPLITSEG_PLUGIN_PATH entry is relative and was ignored (give an absolute folder)");
        continue;
      }
      r->addFolder(folder, /*mustExist=*/false);
    }
    return r;
  }();
  return *registry;
}

std::vector<std::string> PluginRegistry::defaultFolders() {
  std::vector<std::string> out;
  const std::string exeDir = executableDir();
  if (!exeDir.empty()) out.push_back((fs::path(exeDir) / ".." / "lib" / "splitseg" / "plugins").lexically_normal().string());
  if (const char* env = std::getenv("SPLITSEG_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string part;
    while (std::getline(ss, part, ':'))
      if (!part.empty()) out.push_back(part);
  }
  return out;
}

int PluginRegistry::addFolder(const std::string& folder, bool mustExist) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    if (mustExist) fail(folder, "not a folder");
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    folders_.push_back(folder);
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const auto name = e.path().filename().string();
    if (e.is_regular_file(ec) && name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0)
      files.push_back(e.path());
  }
  if (ec) fail(folder, "cannot list: " + ec.message());
  std::sort(files.begin(), files.end());
  int loaded = 0;
  for (const auto& f : files) loaded += loadLibrary(f.string()) ? 1 : 0;
  return loaded;
}

bool PluginRegistry::loadLibrary(const std::string& path) {
  std::error_code ec;
  const std::string canonical = fs::weakly_canonical(path, ec).string();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(loadedFiles_.begin(), loadedFiles_.end(), canonical) != loadedFiles_.end()) return true;
  }
  // dlopen runs the library's initialisers before any check below can look at it: loading a
  // plugin is running its code. What can be checked before that is who could have put it there.
  if (const std::string why = unsafeToLoad(path); !why.empty()) {
    fail(path, "not loaded: " + why);
    return false;
  }
  // RTLD_NOW: an unresolved symbol fails here with a message instead of crashing on first call.
  // RTLD_LOCAL: two plugins may define the same internal names.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    fail(path, std::string("cannot load: ") + (err ? err : "unknown dlopen error"));
    return false;
  }
  // From here the library stays loaded even on failure: dlclose of a library whose static
  // initialisers registered anything with LibTorch is not safe.
  dlerror();
  auto entry = reinterpret_cast<SplitSegPluginEntryFn>(dlsym(handle, SPLITSEG_PLUGIN_ENTRY_NAME));
  if (!entry) {
    fail(path, std::string("not a SplitSeg plugin: no ") + SPLITSEG_PLUGIN_ENTRY_NAME + "() entry point");
    return false;
  }
  const ArchitecturePlugin* d = nullptr;
  try {
    d = entry();
  } catch (...) {
    fail(path, "the entry point threw");
    return false;
  }
  if (!d) {
    fail(path, "the entry point returned no descriptor");
    return false;
  }
  // apiVersion is first in every version of the struct: safe to read before anything else.
  if (d->apiVersion != kPluginApiVersion) {
    fail(path, "plugin API version " + std::to_string(d->apiVersion) + ", this SplitSeg needs " +
                   std::to_string(kPluginApiVersion) + " (rebuild the plugin against this SplitSeg)");
    return false;
  }
  if (!d->torchVersion || std::string(d->torchVersion) != TORCH_VERSION) {
    fail(path, std::string("built against LibTorch ") + (d->torchVersion ? d->torchVersion : "?") +
                   ", this SplitSeg uses " + TORCH_VERSION + " (rebuild the plugin)");
    return false;
  }
  if (!d->cxxAbi || std::string(d->cxxAbi) != SPLITSEG_PLUGIN_CXX_ABI) {
    fail(path, std::string("built with C++ ABI ") + (d->cxxAbi ? d->cxxAbi : "?") + ", this SplitSeg uses " +
                   SPLITSEG_PLUGIN_CXX_ABI);
    return false;
  }
  std::string why;
  if (!add(*d, path, &why)) {
    fail(path, why);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  loadedFiles_.push_back(canonical);
  return true;
}

bool PluginRegistry::registerArchitecture(const ArchitecturePlugin& d, const std::string& source) {
  std::string why;
  if (add(d, source, &why)) return true;
  fail(source, why);
  return false;
}

bool PluginRegistry::add(const ArchitecturePlugin& d, const std::string& source, std::string* why) {
  if (!d.name || !*d.name || !d.create) {
    *why = "the descriptor has no name or no factory";
    return false;
  }
  auto e = std::make_shared<Entry>();
  e->info.name = d.name;
  e->info.description = d.description ? d.description : "";
  e->info.defaultOptionsJson = d.defaultOptionsJson ? d.defaultOptionsJson : "{}";
  e->info.source = source;
  e->create = d.create;
  try {
    if (!nlohmann::json::parse(e->info.defaultOptionsJson).is_object()) throw std::invalid_argument("not an object");
  } catch (const std::exception& ex) {
    *why = "default options of '" + e->info.name + "' are not a JSON object: " + ex.what();
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& other : entries_)
    if (other->info.name == e->info.name) {
      *why = "architecture '" + e->info.name + "' is already provided by " + other->info.source;
      return false;
    }
  entries_.push_back(std::move(e));
  return true;
}

void PluginRegistry::fail(const std::string& path, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_.push_back({path, reason});
}

std::vector<ArchitectureInfo> PluginRegistry::architectures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ArchitectureInfo> out;
  for (const auto& e : entries_) out.push_back(e->info);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::vector<PluginFailure> PluginRegistry::failures() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failures_;
}

std::vector<std::string> PluginRegistry::folders() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return folders_;
}

bool PluginRegistry::has(const std::string& architecture) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : entries_)
    if (e->info.name == architecture) return true;
  return false;
}

ArchitectureInfo PluginRegistry::info(const std::string& architecture) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string known;
  for (const auto& e : entries_) {
    if (e->info.name == architecture) return e->info;
    known += (known.empty() ? "" : ", ") + e->info.name;
  }
  throw InvalidArgument("unknown architecture '" + architecture + "' (available: " + known +
                        "; plugins load from " + "<prefix>/lib/splitseg/plugins and SPLITSEG_PLUGIN_PATH)");
}

std::shared_ptr<model::StagedNetwork> PluginRegistry::create(const std::string& architecture,
                                                             const std::string& optionsJson) const {
  const ArchitectureInfo i = info(architecture);
  NetworkFactoryFn factory = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : entries_)
      if (e->info.name == architecture) factory = e->create;
  }
  const std::string options = optionsJson.empty() ? i.defaultOptionsJson : optionsJson;
  std::shared_ptr<model::StagedNetwork> net;
  try {
    net = factory(options);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw InvalidArgument(architecture + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw InvalidArgument(architecture + ": " + e.what());
  }
  if (!net) throw InvalidArgument(architecture + ": the plugin built no network");
  if (net->architecture() != architecture)
    throw InvalidArgument(architecture + ": the plugin built a '" + net->architecture() + "' network");
  return net;
}

} // namespace splitseg::plugin
