# Helpers shared by the leaf CMakeLists.

# splitseg_library(NAME SOURCES... [TORCH])
#   One static library per leaf folder; TORCH adds LibTorch and a shared precompiled header.
function(splitseg_library name)
  cmake_parse_arguments(A "TORCH" "" "SOURCES;LINK" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  # Core libraries hold no Qt: no moc pass for them.
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON AUTOMOC OFF AUTORCC OFF)
  if(A_LINK)
    target_link_libraries(${name} PUBLIC ${A_LINK})
  endif()
  if(A_TORCH)
    target_link_libraries(${name} PUBLIC ${TORCH_LIBRARIES})
    target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  endif()
endfunction()

# splitseg_test(<Name>Test SOURCES <Name>Test.cpp ... LABELS <tier> [more labels] [LINK libs...])
#   The executable is <Name>Test; the CTest name is <tier>.<Name>Test (ctest -L <tier> runs a tier).
function(splitseg_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LABELS;LINK" ${ARGN})
  if(NOT name MATCHES "Test$" OR NOT A_LABELS)
    message(FATAL_ERROR "splitseg_test(${name}): name it <Name>Test and give its tier as the first label")
  endif()
  list(GET A_LABELS 0 tier)
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE Qt6::Test ${A_LINK})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  add_test(NAME ${tier}.${name} COMMAND ${name})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  set_tests_properties(${tier}.${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
                       ENVIRONMENT "SPLITSEG_SOURCE_DIR=${PROJECT_SOURCE_DIR};OMP_NUM_THREADS=2")
endfunction()
