# Debian package: `cpack -G DEB` in a build folder (or `cmake --build . --target package`).
#
# Layout (prefix /usr):
#   bin/splitseg, bin/splitseg-cli        run path $ORIGIN/../lib/splitseg
#   lib/splitseg/                         LibTorch and the CUDA runtime libraries it loads
#   lib/splitseg/plugins/                 architecture plugins (found relative to the executable)
#   share/applications/splitseg.desktop, share/icons/hicolor/scalable/apps/splitseg.svg
#   share/splitseg/presets/               window/level and transfer-function presets
#
# Qt, VTK and ITK come from Debian (declared dependencies); LibTorch is not packaged by Debian
# in a usable version (DESIGN.md), so the libraries the programs actually need are bundled:
# the closure of their shared-library dependencies outside the system folders, resolved from
# the build tree at install time, plus the libraries LibTorch/cuDNN open with dlopen.

set(SPLITSEG_BUNDLE_TORCH ON CACHE BOOL "Install LibTorch and the CUDA libraries it needs under lib/splitseg")

# Installed programs find the bundled LibTorch next door; the build tree keeps its own run path.
foreach(_t splitseg-cli splitseg)
  if(TARGET ${_t})
    set_target_properties(${_t} PROPERTIES INSTALL_RPATH "$ORIGIN/../lib/splitseg")
  endif()
endforeach()

# Desktop integration and presets (resources/ is shared with the GUI).
install(FILES ${PROJECT_SOURCE_DIR}/resources/splitseg.desktop DESTINATION share/applications)
install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/splitseg.svg DESTINATION share/icons/hicolor/scalable/apps)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/presets DESTINATION share/splitseg)

if(SPLITSEG_BUNDLE_TORCH)
  set(_bundle_exes "$<TARGET_FILE:splitseg-cli>")
  if(TARGET splitseg)
    set(_bundle_exes "${_bundle_exes};$<TARGET_FILE:splitseg>")
  endif()
  set(_bundle_modules "")
  foreach(_p splitseg_resunet3d)
    if(TARGET ${_p})
      list(APPEND _bundle_modules "$<TARGET_FILE:${_p}>")
    endif()
  endforeach()
  get_filename_component(_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
  install(CODE "set(SPLITSEG_BUNDLE_EXES \"${_bundle_exes}\")
set(SPLITSEG_BUNDLE_MODULES \"${_bundle_modules}\")
set(SPLITSEG_TORCH_LIB_DIR \"${_torch_lib_dir}\")")
  install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/BundleTorch.cmake)
endif()

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "splitseg")
set(CPACK_PACKAGE_VENDOR "SplitSeg")
set(CPACK_PACKAGE_CONTACT "SplitSeg developers <splitseg@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "3D medical segmentation workstation with a U-Net split across devices")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/splitseg")
# gzip: the bundled LibTorch is gigabytes; xz would take many minutes on a small machine.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# Declared by hand: dpkg-shlibdeps would walk the bundled CUDA libraries too (slow, and they
# are not from Debian). These are the Debian 12 packages the programs link against.
set(_deps "libc6 (>= 2.34), libstdc++6 (>= 12), libgcc-s1, libssl3")
if(SPLITSEG_WITH_ITK)
  string(APPEND _deps ", libinsighttoolkit5.2, libgdcm3.0")
endif()
if(SPLITSEG_BUILD_GUI)
  string(APPEND _deps ", libqt6core6 (>= 6.4), libqt6gui6 (>= 6.4), libqt6widgets6 (>= 6.4), libqt6opengl6 (>= 6.4)"
                      ", libqt6openglwidgets6 (>= 6.4), libqt6charts6 (>= 6.4), libqt6svg6 (>= 6.4), libvtk9.1")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_deps}")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "SplitSeg loads CT volumes, shows them in 3D, places the stages of a 3D U-Net
 on the devices of the machine and trains and runs the split model. Includes
 splitseg-cli, architecture plugins and a bundled LibTorch.")
# The bundled libraries are stripped by their vendors already; stripping GBs again is slow.
set(CPACK_STRIP_FILES OFF)
include(CPack)
