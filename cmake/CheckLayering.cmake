# Layering rules for sources: no file under core/ includes a Qt or VTK header; no file under
# core/placement or core/planner includes a LibTorch header (torch/, ATen/, c10/, caffe2/) or a
# core/model, core/engine or core/ranks header; core/placement includes nothing of core/planner and
# core/engine nothing of core/ranks (dependencies point one way). Every offending include is
# reported as file:line.
#
# As a script:  cmake -DSPLITSEG_ROOT=<source root> -P cmake/CheckLayering.cmake [-DSTAMP=<file>]
# As a module:  include(cmake/CheckLayering.cmake); splitseg_scan_layering(<root> <out-var>)

# Include lines (CMake regex: no \s). Qt: <QString>, <QtTest>, <QtCore/qstring.h>; VTK: <vtk...>.
set(_splitseg_include "^[ \t]*#[ \t]*include[ \t]*[<\"]")
set(_splitseg_qt_vtk_regex "${_splitseg_include}(Q[A-Za-z0-9_]*[>\"]|Qt[A-Za-z0-9_]*/|vtk)")
set(_splitseg_placement_regex "${_splitseg_include}(torch/|ATen/|c10/|caffe2/|core/model/|core/engine/|core/ranks/)")
set(_splitseg_planner_regex "${_splitseg_include}core/planner/")
set(_splitseg_ranks_regex "${_splitseg_include}core/ranks/")

set(_splitseg_layering_script ${CMAKE_CURRENT_LIST_FILE})

# Source files the rules apply to (also the build-time check's dependencies); pass
# CONFIGURE_DEPENDS to re-glob when files are added or removed.
function(splitseg_layering_sources root out)
  file(GLOB_RECURSE _files LIST_DIRECTORIES false ${ARGN}
       "${root}/core/*.h" "${root}/core/*.hpp" "${root}/core/*.cpp" "${root}/core/*.cc" "${root}/core/*.cxx")
  list(SORT _files)
  set(${out} ${_files} PARENT_SCOPE)
endfunction()

# Appends "file:line: #include ... (rule)" for the first hit of each matching line.
function(_splitseg_report file regex rule out)
  file(STRINGS "${file}" _hits REGEX "${regex}")
  if(NOT _hits)
    return()
  endif()
  file(READ "${file}" _text)
  string(PREPEND _text "\n")
  set(_found ${${out}})
  set(_line 0)
  foreach(_hit IN LISTS _hits)
    # Whole lines, in order: the next "\n<hit>" after the previous one is its line.
    string(FIND "${_text}" "\n${_hit}" _pos)
    math(EXPR _pos "${_pos} + 1")
    string(SUBSTRING "${_text}" 0 ${_pos} _before)
    string(SUBSTRING "${_text}" ${_pos} -1 _text)
    string(REGEX MATCHALL "\n" _newlines "${_before}")
    list(LENGTH _newlines _n)
    math(EXPR _line "${_line} + ${_n}")
    string(STRIP "${_hit}" _shown)
    list(APPEND _found "${file}:${_line}: ${_shown}  (${rule})")
  endforeach()
  set(${out} ${_found} PARENT_SCOPE)
endfunction()

function(splitseg_scan_layering root out)
  get_filename_component(root "${root}" ABSOLUTE)
  splitseg_layering_sources("${root}" _files)
  set(_problems)
  foreach(_f IN LISTS _files)
    _splitseg_report("${_f}" "${_splitseg_qt_vtk_regex}" "core/ is Qt- and VTK-free" _problems)
    file(RELATIVE_PATH _rel "${root}" "${_f}")
    if(_rel MATCHES "^core/(placement|planner)/")
      _splitseg_report("${_f}" "${_splitseg_placement_regex}"
                       "core/${CMAKE_MATCH_1} is plain data: no LibTorch, no core/model, core/engine or core/ranks" _problems)
    endif()
    if(_rel MATCHES "^core/placement/")
      _splitseg_report("${_f}" "${_splitseg_planner_regex}" "core/placement is below core/planner" _problems)
    endif()
    if(_rel MATCHES "^core/engine/")
      _splitseg_report("${_f}" "${_splitseg_ranks_regex}" "core/engine is below core/ranks" _problems)
    endif()
  endforeach()
  set(${out} ${_problems} PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT SPLITSEG_ROOT)
    message(FATAL_ERROR "usage: cmake -DSPLITSEG_ROOT=<source root> -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  splitseg_scan_layering("${SPLITSEG_ROOT}" _problems)
  if(_problems)
    list(JOIN _problems "\n  " _text)
    message(FATAL_ERROR "Layering violation:\n  ${_text}")
  endif()
  if(STAMP)
    file(TOUCH "${STAMP}")
  endif()
endif()
