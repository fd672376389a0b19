# nlohmann_json from .gpu-kit (tests/gpu/prepare.sh): header-only.
get_filename_component(_kit "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kit}/include")
endif()
set(nlohmann_json_FOUND TRUE)
