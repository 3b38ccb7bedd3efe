#!/usr/bin/env bash
# Configures and builds Banyan into build/ (or $BANYAN_BUILD_DIR) with ccache.
# CUDA is built when nvcc exists (/usr/local/cuda/bin/nvcc or on PATH); extra CMake
# arguments pass through:  bash scripts/build.sh -DBANYAN_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BANYAN_BUILD_DIR:-build}
ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=${BANYAN_BUILD_TYPE:-RelWithDebInfo}
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ "${CI:-}" = "true" ] && [ -z "${BANYAN_CUDA_ARCHS:-}" ]; then
  # CI has nvcc but no GPU: compile every CUDA file, for one architecture, to keep within budget.
  BANYAN_CUDA_ARCHS="90a-real"
fi
if [ -n "${BANYAN_CUDA_ARCHS:-}" ]; then
  ARGS+=("-DCMAKE_CUDA_ARCHITECTURES=${BANYAN_CUDA_ARCHS}")
fi
cmake -S . -B "$BUILD_DIR" "${ARGS[@]}" "$@" > "$BUILD_DIR.configure.log" 2>&1 || {
  cat "$BUILD_DIR.configure.log"; exit 1; }
ninja -C "$BUILD_DIR" -j "${BANYAN_JOBS:-$(nproc)}"
