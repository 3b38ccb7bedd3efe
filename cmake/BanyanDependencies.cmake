# Finds every required dependency and wraps the ones without CMake packages in imported targets.
# With BANYAN_STATIC_DEPS, Abseil, Protobuf and Lua are linked from their static archives so the
# GPU bundle needs none of them on the device machine (BUILD_NOTES.md).

# --- Abseil ---------------------------------------------------------------------------------
find_package(absl CONFIG REQUIRED)
if(BANYAN_STATIC_DEPS)
  # Debian's imported targets name the .so files; re-point each to the .a shipped beside it.
  get_property(_absl_targets DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY IMPORTED_TARGETS)
  foreach(_t IN LISTS _absl_targets)
    if(NOT _t MATCHES "^absl::")
      continue()
    endif()
    get_target_property(_type ${_t} TYPE)
    if(NOT _type STREQUAL "SHARED_LIBRARY")
      continue()
    endif()
    get_target_property(_loc ${_t} IMPORTED_LOCATION_NONE)
    string(REGEX REPLACE "\\.so[.0-9]*$" ".a" _static "${_loc}")
    if(EXISTS "${_static}")
      set_target_properties(${_t} PROPERTIES IMPORTED_LOCATION_NONE "${_static}"
                                            IMPORTED_SONAME_NONE "")
    endif()
  endforeach()
endif()

# --- Protobuf -------------------------------------------------------------------------------
if(BANYAN_STATIC_DEPS)
  set(Protobuf_USE_STATIC_LIBS ON)
endif()
find_package(Protobuf REQUIRED)

# --- Lua 5.4 (compiled as C++, so Lua errors unwind C++ destructors) -------------------------
find_path(BANYAN_LUA_INCLUDE_DIR lua.hpp PATHS /usr/include/lua5.4 REQUIRED NO_DEFAULT_PATH)
if(BANYAN_STATIC_DEPS)
  find_library(BANYAN_LUA_LIBRARY NAMES liblua5.4-c++.a REQUIRED)
else()
  find_library(BANYAN_LUA_LIBRARY NAMES lua5.4-c++ REQUIRED)
endif()
add_library(banyan_lua INTERFACE)
target_include_directories(banyan_lua SYSTEM INTERFACE ${BANYAN_LUA_INCLUDE_DIR})
target_link_libraries(banyan_lua INTERFACE ${BANYAN_LUA_LIBRARY} ${CMAKE_DL_LIBS} m)
add_library(Banyan::lua ALIAS banyan_lua)

find_package(Threads REQUIRED)

# --- RE2 (linear-time regular expressions: answer extraction, stop patterns) ---------------
find_path(BANYAN_RE2_INCLUDE_DIR re2/re2.h REQUIRED)
if(BANYAN_STATIC_DEPS)
  find_library(BANYAN_RE2_LIBRARY NAMES libre2.a REQUIRED)
else()
  find_library(BANYAN_RE2_LIBRARY NAMES re2 REQUIRED)
endif()
add_library(banyan_re2 INTERFACE)
target_include_directories(banyan_re2 SYSTEM INTERFACE ${BANYAN_RE2_INCLUDE_DIR})
target_link_libraries(banyan_re2 INTERFACE ${BANYAN_RE2_LIBRARY} Threads::Threads)
add_library(Banyan::re2 ALIAS banyan_re2)

# --- Threads ---------------------------------------------------------------------------------
find_package(Threads REQUIRED)

# --- CUDA toolkit, cuBLAS, NCCL ---------------------------------------------------------------
if(BANYAN_CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(BANYAN_STATIC_DEPS)
    set(BANYAN_CUDART CUDA::cudart_static)
  else()
    set(BANYAN_CUDART CUDA::cudart)
  endif()
  find_path(BANYAN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  find_library(BANYAN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  add_library(banyan_nccl INTERFACE)
  target_include_directories(banyan_nccl SYSTEM INTERFACE ${BANYAN_NCCL_INCLUDE_DIR})
  target_link_libraries(banyan_nccl INTERFACE ${BANYAN_NCCL_LIBRARY})
  add_library(Banyan::nccl ALIAS banyan_nccl)
endif()

# --- GoogleTest and Google Benchmark ------------------------------------------------------------
if(BANYAN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(BANYAN_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
