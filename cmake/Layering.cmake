# Layering rules, checked when the project is configured, after all targets exist:
#   - no target defined under core/ links Qt or VTK, directly or through the libraries it links;
#   - splitseg_placement and splitseg_planner do not link LibTorch;
#   - no core/ source includes a Qt or VTK header, no core/placement source a LibTorch header
#     (cmake/CheckLayering.cmake; rerun at build time whenever a core source changes).
# A violation stops configuration (or the build) with the link chain or file:line.
include(${CMAKE_CURRENT_LIST_DIR}/CheckLayering.cmake)

# Targets defined in <dir> and the directories below it.
function(_splitseg_targets_in dir out)
  get_property(_targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _splitseg_targets_in("${_sub}" _more)
    list(APPEND _targets ${_more})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

# What <target> links (its own and its interface link libraries), generator expressions reduced to
# the library they name; cross-directory markers (::@...) dropped.
function(_splitseg_link_items target out)
  get_target_property(_aliased ${target} ALIASED_TARGET)
  if(_aliased)
    set(target ${_aliased})
  endif()
  set(_raw)
  get_target_property(_imported ${target} IMPORTED)
  if(NOT _imported)
    get_target_property(_own ${target} LINK_LIBRARIES)
    if(_own)
      list(APPEND _raw ${_own})
    endif()
  endif()
  get_target_property(_interface ${target} INTERFACE_LINK_LIBRARIES)
  if(_interface)
    list(APPEND _raw ${_interface})
  endif()
  set(_items)
  foreach(_item IN LISTS _raw)
    string(REGEX REPLACE "^\\$<[A-Z_]+:(.*)>$" "\\1" _item "${_item}")  # $<LINK_ONLY:x>, $<BUILD_INTERFACE:x>
    string(REGEX REPLACE "^\\$<.*>:(.+)>$" "\\1" _item "${_item}")        # $<$<CONFIG:Debug>:x>
    if(_item AND NOT _item MATCHES "^::@" AND NOT _item MATCHES "^\\$<")
      list(APPEND _items "${_item}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _items)
  set(${out} ${_items} PARENT_SCOPE)
endfunction()

# Depth-first through every target <target> links; sets <out> to the first chain
# "a -> b -> item" whose last item matches <regex>, or to nothing.
function(_splitseg_find_link target regex out)
  set(_stack "${target}")
  set(_chains "${target}")
  set(_seen "${target}")
  while(_stack)
    list(POP_BACK _stack _t)
    list(POP_BACK _chains _chain)
    _splitseg_link_items(${_t} _items)
    foreach(_item IN LISTS _items)
      if(_item MATCHES "${regex}")
        set(${out} "${_chain} -> ${_item}" PARENT_SCOPE)
        return()
      endif()
      if(TARGET "${_item}" AND NOT "${_item}" IN_LIST _seen)
        list(APPEND _seen "${_item}")
        list(APPEND _stack "${_item}")
        list(APPEND _chains "${_chain} -> ${_item}")
      endif()
    endforeach()
  endwhile()
  set(${out} "" PARENT_SCOPE)
endfunction()

# Qt and VTK, as imported targets or library files.
set(_splitseg_qt_vtk_link "^(Qt[0-9]*::|VTK::|vtk)|/lib(Qt[0-9]|vtk)[^/]*$")
set(_splitseg_torch_link "^(torch|torch_library|torch_cpu|torch_cuda|c10|c10_cuda|Torch::.*|caffe2::.*)$|/lib(torch|c10|caffe2)[^/]*$")

function(splitseg_check_layering root)
  set(_problems)
  _splitseg_targets_in("${root}/core" _core_targets)
  foreach(_t IN LISTS _core_targets)
    if(NOT _t MATCHES "^splitseg_")
      continue()
    endif()
    _splitseg_find_link(${_t} "${_splitseg_qt_vtk_link}" _chain)
    if(_chain)
      list(APPEND _problems "${_t} links Qt or VTK (core/ is GUI-free): ${_chain}")
    endif()
  endforeach()
  foreach(_t splitseg_placement splitseg_planner)
    if(TARGET ${_t})
      _splitseg_find_link(${_t} "${_splitseg_torch_link}" _chain)
      if(_chain)
        string(REPLACE "splitseg_" "" _folder ${_t})
        list(APPEND _problems "${_t} links LibTorch (${_folder} is plain data): ${_chain}")
      endif()
    endif()
  endforeach()
  splitseg_scan_layering("${root}" _source_problems)
  list(APPEND _problems ${_source_problems})
  if(_problems)
    list(JOIN _problems "\n  " _text)
    message(FATAL_ERROR "Layering violation:\n  ${_text}")
  endif()

  # The source rules again at build time, whenever a core source changes (no reconfigure needed).
  splitseg_layering_sources("${root}" _sources CONFIGURE_DEPENDS)
  set(_stamp ${CMAKE_CURRENT_BINARY_DIR}/layering.stamp)
  add_custom_command(OUTPUT ${_stamp}
    COMMAND ${CMAKE_COMMAND} -DSPLITSEG_ROOT=${root} -DSTAMP=${_stamp} -P ${_splitseg_layering_script}
    DEPENDS ${_sources} ${_splitseg_layering_script}
    COMMENT "Checking layering rules of core/ sources" VERBATIM)
  add_custom_target(splitseg_layering ALL DEPENDS ${_stamp})
  if(TARGET splitseg_base)
    add_dependencies(splitseg_base splitseg_layering)
  endif()
endfunction()
