# cmake -DSOURCE_ROOT=<repo> -DWORK_DIR=<scratch> -DGENERATOR=<generator> -P LayeringCheckTest.cmake
# Copies real core files into a scratch tree with a forbidden include added, and configures tiny
# projects whose core targets link Qt or LibTorch: each must fail naming the file:line or the link
# chain; the clean variants and the real tree must pass.
function(expect what rc output want_fail)
  if(want_fail)
    if(rc EQUAL 0)
      message(SEND_ERROR "${what}: passed, expected a layering violation\n${output}")
      return()
    endif()
    foreach(_needle IN LISTS ARGN)
      string(FIND "${output}" "${_needle}" _at)
      if(_at EQUAL -1)
        message(SEND_ERROR "${what}: missing \"${_needle}\" in\n${output}")
        return()
      endif()
    endforeach()
  elseif(NOT rc EQUAL 0)
    message(SEND_ERROR "${what}: failed, expected to pass\n${output}")
    return()
  endif()
  message(STATUS "${what}: ok")
endfunction()

function(scan root out_rc out_text)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSPLITSEG_ROOT=${root} -P ${SOURCE_ROOT}/cmake/CheckLayering.cmake
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  string(REGEX REPLACE "[ \t\r\n]+" " " _out "${_out}")  # CMake wraps long messages
  set(${out_rc} ${_rc} PARENT_SCOPE)
  set(${out_text} "${_out}" PARENT_SCOPE)
endfunction()

# Copies <file> of the real tree to <root>, with <line> inserted after its first line.
function(copy_with_include root file line)
  file(READ ${SOURCE_ROOT}/${file} _text)
  string(FIND "${_text}" "\n" _eol)
  math(EXPR _eol "${_eol} + 1")
  string(SUBSTRING "${_text}" 0 ${_eol} _head)
  string(SUBSTRING "${_text}" ${_eol} -1 _tail)
  file(WRITE ${root}/${file} "${_head}${line}\n${_tail}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})

# Sources: the real tree passes.
scan(${SOURCE_ROOT} _rc _out)
expect("source tree" "${_rc}" "${_out}" FALSE)

# Sources: clean copies pass; a Qt include in core/base and in core/ranks, a VTK include in
# core/base, a LibTorch include in core/placement and in core/planner, a planner include in
# core/placement and a ranks include in core/engine each fail with file:line.
set(_src ${WORK_DIR}/src)
file(COPY ${SOURCE_ROOT}/core/base/Error.h ${SOURCE_ROOT}/core/base/Units.h DESTINATION ${_src}/core/base)
file(COPY ${SOURCE_ROOT}/core/placement/Placement.h ${SOURCE_ROOT}/core/placement/Precision.h
     DESTINATION ${_src}/core/placement)
file(COPY ${SOURCE_ROOT}/core/planner/StepTime.h DESTINATION ${_src}/core/planner)
file(COPY ${SOURCE_ROOT}/core/ranks/RankEnv.h DESTINATION ${_src}/core/ranks)
file(COPY ${SOURCE_ROOT}/core/engine/Loss.h DESTINATION ${_src}/core/engine)
scan(${_src} _rc _out)
expect("clean copies" "${_rc}" "${_out}" FALSE)
copy_with_include(${_src} core/base/Error.h "#include <QString>")
copy_with_include(${_src} core/base/Units.h "#include <vtkSmartPointer.h>")
copy_with_include(${_src} core/placement/Placement.h "#include <torch/types.h>")
copy_with_include(${_src} core/placement/Precision.h "#include \"core/planner/StepTime.h\"")
copy_with_include(${_src} core/planner/StepTime.h "#include <ATen/ATen.h>")
copy_with_include(${_src} core/ranks/RankEnv.h "#include <QProcess>")
copy_with_include(${_src} core/engine/Loss.h "#include \"core/ranks/RankEnv.h\"")
scan(${_src} _rc _out)
expect("forbidden includes" "${_rc}" "${_out}" TRUE
       "core/base/Error.h:2: #include <QString>" "core/base/Units.h:2: #include <vtkSmartPointer.h>"
       "core/placement/Placement.h:2: #include <torch/types.h>"
       "core/placement/Precision.h:2: #include \"core/planner/StepTime.h\" (core/placement is below core/planner)"
       "core/planner/StepTime.h:2: #include <ATen/ATen.h>" "core/ranks/RankEnv.h:2: #include <QProcess>"
       "core/engine/Loss.h:2: #include \"core/ranks/RankEnv.h\" (core/engine is below core/ranks)")

# Targets: a project whose core targets link Qt (through another core target) and whose placement
# links torch fails with the chains; the same project without those links passes.
set(_proj ${WORK_DIR}/project)
file(WRITE ${_proj}/CMakeLists.txt "cmake_minimum_required(VERSION 3.22)
project(LayeringFixture NONE)
add_library(Qt6::Core INTERFACE IMPORTED)
add_library(torch INTERFACE IMPORTED)
add_subdirectory(core)
include(${SOURCE_ROOT}/cmake/Layering.cmake)
splitseg_check_layering(\${CMAKE_CURRENT_SOURCE_DIR})
")
file(WRITE ${_proj}/core/CMakeLists.txt "add_subdirectory(base)\nadd_subdirectory(placement)\n")
file(WRITE ${_proj}/core/base/CMakeLists.txt "add_library(splitseg_base INTERFACE)
add_library(splitseg_util INTERFACE)
if(BAD)
  target_link_libraries(splitseg_util INTERFACE Qt6::Core)
endif()
target_link_libraries(splitseg_base INTERFACE \$<BUILD_INTERFACE:splitseg_util>)
")
file(WRITE ${_proj}/core/placement/CMakeLists.txt "add_library(splitseg_placement INTERFACE)
target_link_libraries(splitseg_placement INTERFACE splitseg_base)
if(BAD)
  target_link_libraries(splitseg_placement INTERFACE \$<LINK_ONLY:torch>)
endif()
")
foreach(_bad OFF ON)
  execute_process(COMMAND ${CMAKE_COMMAND} -G ${GENERATOR} -S ${_proj} -B ${WORK_DIR}/build-${_bad} -DBAD=${_bad}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  string(REGEX REPLACE "[ \t\r\n]+" " " _out "${_out}")
  if(_bad)
    expect("targets linking Qt and torch" "${_rc}" "${_out}" TRUE
           "splitseg_base links Qt or VTK (core/ is GUI-free): splitseg_base -> splitseg_util -> Qt6::Core"
           "splitseg_placement links LibTorch (placement is plain data): splitseg_placement -> torch")
  else()
    expect("clean targets" "${_rc}" "${_out}" FALSE)
  endif()
endforeach()
