# Helpers that give every Banyan target the same warnings, sanitizers and include roots.
#
#   banyan_library(NAME SRCS ... DEPS ...)      a library target named banyan_<NAME>
#   banyan_test(NAME SRCS ... DEPS ... [GPU])   a GoogleTest binary registered with ctest;
#                                               GPU tests carry the ctest label "gpu"
#   banyan_bench(NAME SRCS ... DEPS ... [GPU])  a Google Benchmark binary (never run by ctest)

set(BANYAN_WARNINGS -Wall -Wextra)

function(banyan_apply_common target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${BANYAN_WARNINGS}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr -lineinfo>)
  if(BANYAN_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${BANYAN_SANITIZE} -fno-omit-frame-pointer>)
    target_link_options(${target} PRIVATE -fsanitize=${BANYAN_SANITIZE})
  endif()
endfunction()

function(banyan_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(target banyan_${name})
  if(ARG_SRCS)
    add_library(${target} STATIC ${ARG_SRCS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/sdk/include
                                                ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
    banyan_apply_common(${target})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}
                                                   ${PROJECT_SOURCE_DIR}/sdk/include ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} INTERFACE ${ARG_PUBLIC_DEPS} ${ARG_DEPS})
  endif()
  add_library(Banyan::${name} ALIAS ${target})
endfunction()

function(banyan_test name)
  if(NOT BANYAN_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "GPU" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE BANYAN_ASSETS_DIR="${BANYAN_ASSETS_DIR}"
                                             BANYAN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  banyan_apply_common(${name})
  set(labels ${ARG_LABELS})
  if(ARG_GPU)
    list(APPEND labels gpu)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set(props TIMEOUT ${ARG_TIMEOUT})
  if(labels)
    list(APPEND props LABELS "${labels}")
  endif()
  # Listing a test binary's cases runs it once before ctest starts it: CMake's
  # 5 s default was once exceeded on a loaded 2-core machine (a cold, freshly
  # linked static binary), which fails the whole ctest run.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120 PROPERTIES ${props})
  install(TARGETS ${name} RUNTIME DESTINATION bin)
  set_property(GLOBAL APPEND PROPERTY BANYAN_TEST_BINARIES ${name})
  if(ARG_GPU)
    set_property(GLOBAL APPEND PROPERTY BANYAN_GPU_TEST_BINARIES ${name})
  endif()
endfunction()

function(banyan_bench name)
  if(NOT BANYAN_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(ARG "GPU" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  banyan_apply_common(${name})
  install(TARGETS ${name} RUNTIME DESTINATION bin)
  set_property(GLOBAL APPEND PROPERTY BANYAN_BENCH_BINARIES ${name})
  if(ARG_GPU)
    set_property(GLOBAL APPEND PROPERTY BANYAN_GPU_BENCH_BINARIES ${name})
  endif()
endfunction()
