#pragma once
// The interface through which a shared library contributes a network architecture.
//
// A plugin is a shared library (.so) that exports one extern "C" function,
// `splitseg_plugin_entry`, returning a pointer to a static ArchitecturePlugin. The registry
// (core/plugin/PluginRegistry) dlopen()s every .so in its plugin folders, reads that struct,
// checks it, and from then on builds networks of that architecture through `create`. The
// engine, the memory planner, the placement view and checkpoints only ever see the returned
// model::StagedNetwork, so a plugin architecture is placed, trained, saved and exported like
// the built-in U-Net.
//
// ABI rules (why they exist: the struct carries C++ types across the library boundary):
//  - Build the plugin with the same compiler family and standard library, the same
//    _GLIBCXX_USE_CXX11_ABI setting and the same LibTorch version as SplitSeg. The registry
//    compares `torchVersion` and `cxxAbi` with its own and refuses a mismatch with a message
//    instead of crashing later inside LibTorch.
//  - `apiVersion` is the first member and never moves, so an old or new plugin is detected
//    before any other member is read. Bump kPluginApiVersion on any change to this file.
//  - Strings are static C strings owned by the plugin (the library stays loaded for the life
//    of the process; it is never unloaded because networks it built may still be alive).
//  - `create` may throw (splitseg::InvalidArgument for bad options); the registry converts any
//    exception into a message. It must not call exit/abort on bad input.
//  - Stages must use layers the planner models (Conv3d, ConvTranspose3d, InstanceNorm3d,
//    BatchNorm3d, ReLU, MaxPool3d, Dropout as registered modules; max-pool, dropout, concat and
//    residual adds as functional ops described by StageSpec levels and inputs). The planner
//    refuses any other registered leaf module with a message naming the stage.
//  - Options are a JSON object; `defaultOptionsJson` must parse and build a network. By
//    convention "in_channels" and "out_channels" are honoured so datasets can set them.
#include "core/model/StagedNetwork.h"

#include <torch/version.h>

#include <memory>
#include <string>

namespace splitseg::plugin {

// Version of this header. Version 1: the members below.
constexpr int kPluginApiVersion = 1;

// "gcc-cxx11abi1": what must match between SplitSeg and a plugin besides LibTorch.
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define SPLITSEG_PLUGIN_CXX_ABI "libstdc++-cxx11abi1"
#else
#define SPLITSEG_PLUGIN_CXX_ABI "libstdc++-cxx11abi0"
#endif

using NetworkFactoryFn = std::shared_ptr<model::StagedNetwork> (*)(const std::string& optionsJson);

struct ArchitecturePlugin {
  int apiVersion = kPluginApiVersion;   // must stay first
  const char* name = nullptr;           // architecture name, unique: "resunet3d"
  const char* description = nullptr;    // one line for lists and tooltips
  const char* defaultOptionsJson = "{}";
  NetworkFactoryFn create = nullptr;
  const char* torchVersion = TORCH_VERSION;       // LibTorch the plugin was built against
  const char* cxxAbi = SPLITSEG_PLUGIN_CXX_ABI;   // standard library ABI the plugin was built with
};

} // namespace splitseg::plugin

// The symbol the registry looks up; name it through this macro in plugins.
#define SPLITSEG_PLUGIN_ENTRY splitseg_plugin_entry
#define SPLITSEG_PLUGIN_ENTRY_NAME "splitseg_plugin_entry"
extern "C" {
using SplitSegPluginEntryFn = const splitseg::plugin::ArchitecturePlugin* (*)();
}
