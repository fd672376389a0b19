# install(SCRIPT) half of CPack.cmake: copies the non-system shared libraries the programs
# and plugins need into <prefix>/lib/splitseg. Resolved from the build tree's binaries (their
# run paths point at the LibTorch in use); torch's own run paths lead to the CUDA libraries.
# file(INSTALL) prepends $ENV{DESTDIR} itself (CPack stages through DESTDIR).
set(_dest "${CMAKE_INSTALL_PREFIX}/lib/splitseg")
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${SPLITSEG_BUNDLE_EXES}
  MODULES ${SPLITSEG_BUNDLE_MODULES}
  DIRECTORIES ${SPLITSEG_TORCH_LIB_DIR}
  RESOLVED_DEPENDENCIES_VAR _resolved
  UNRESOLVED_DEPENDENCIES_VAR _unresolved
  CONFLICTING_DEPENDENCIES_PREFIX _conflict
  # Everything from Debian (Qt, VTK, ITK, libc, ...) is a package dependency, not bundled.
  POST_EXCLUDE_REGEXES "^/lib/" "^/lib64/" "^/usr/lib/" "^/usr/local/lib/")
# The same soname from two places (e.g. libcudart from the CUDA toolkit, named in the build run
# path, and from the torch wheel's nvidia folder): one folder holds one copy, so take the one
# LibTorch was built with (the wheel's), else the first.
foreach(_name ${_conflict_FILENAMES})
  set(_pick "")
  foreach(_cand ${_conflict_${_name}})
    if(NOT _pick AND _cand MATCHES "/nvidia/|/torch/lib/")
      set(_pick "${_cand}")
    endif()
  endforeach()
  if(NOT _pick)
    list(GET _conflict_${_name} 0 _pick)
  endif()
  list(APPEND _resolved "${_pick}")
endforeach()
if(_unresolved)
  message(WARNING "splitseg bundle: unresolved libraries: ${_unresolved}")
endif()
# Loaded with dlopen, so invisible to the scan: cuDNN's engine libraries and NVRTC.
set(_extra "")
foreach(_lib ${_resolved})
  get_filename_component(_dir "${_lib}" DIRECTORY)
  get_filename_component(_name "${_lib}" NAME)
  if(_name MATCHES "^libcudnn\\.so")
    file(GLOB _more "${_dir}/libcudnn*.so*")
    list(APPEND _extra ${_more})
  elseif(_name MATCHES "^libcudart\\.so")
    file(GLOB _more "${_dir}/libnvrtc*.so*")
    list(APPEND _extra ${_more})
  endif()
endforeach()
file(GLOB _torch_extra "${SPLITSEG_TORCH_LIB_DIR}/libcaffe2_nvrtc.so")
list(APPEND _extra ${_torch_extra})
list(APPEND _resolved ${_extra})
list(REMOVE_DUPLICATES _resolved)
list(LENGTH _resolved _n)
message(STATUS "splitseg bundle: ${_n} libraries into ${_dest}")
foreach(_lib ${_resolved})
  # FOLLOW_SYMLINK_CHAIN keeps the soname links (libfoo.so.1 -> libfoo.so.1.2).
  file(INSTALL "${_lib}" DESTINATION "${_dest}" FOLLOW_SYMLINK_CHAIN)
endforeach()
