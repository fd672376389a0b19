# CLI11 from .gpu-kit (tests/gpu/prepare.sh): header-only.
get_filename_component(_kit "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kit}/include")
endif()
set(CLI11_FOUND TRUE)
