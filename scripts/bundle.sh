#!/usr/bin/env bash
# Builds the relocatable GPU bundle: every GPU test and benchmark (and the banyan tool)
# with Abseil, Protobuf, Lua and cudart linked statically, RPATH $ORIGIN/../lib
# (DT_RPATH via --disable-new-dtags) and the few remaining non-CUDA shared libraries
# copied into lib/. cuBLAS and NCCL come from the GPU machine itself.
#
#   bash scripts/bundle.sh [out-dir]       # default: bundle/ (git-ignored)
#   then, with the device tool:  run(command="bundle/bin/device_check.sh", carry=["bundle"])
#
# Environment: BANYAN_CUDA_ARCHS (default "90a-real;90"), BANYAN_BUNDLE_TARGETS (default all),
# BANYAN_BUNDLE_ALL=1 to keep the CPU-only test binaries too (by default the bundle holds only
# what runs on the device: GPU tests, GPU benchmarks and the banyan tool, ~45 MB, under the
# device tool's 64 MiB carry limit).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bundle}
BUILD=build-bundle
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBANYAN_STATIC_DEPS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${BANYAN_CUDA_ARCHS:-90a-real;90}" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
ninja -C "$BUILD" -j "$(nproc)" ${BANYAN_BUNDLE_TARGETS:-}
rm -rf "$OUT"
cmake --install "$BUILD" --prefix "$OUT" --strip >/dev/null
if [ -z "${BANYAN_BUNDLE_ALL:-}" ]; then
  keep=" banyan device_check.sh $(tr '\n' ' ' < "$OUT/share/banyan/gpu_tests.txt") $(tr '\n' ' ' < "$OUT/share/banyan/gpu_benches.txt") "
  for bin in "$OUT"/bin/*; do
    case "$keep" in *" $(basename "$bin") "*) ;; *) rm -f "$bin" ;; esac
  done
fi
# Every shared library the binaries need that the device machine does not have itself.
source scripts/runtime_libs.sh
copy_runtime_libs "$OUT/lib" "$OUT"/bin/*
# Record what the bundle was built from.
git rev-parse HEAD > "$OUT/share/banyan/commit.txt" 2>/dev/null || true
du -sh "$OUT" | awk '{print "[bundle] " $1 " in '"$OUT"'"}'
ls "$OUT/lib"
