#!/usr/bin/env bash
# Packs a few device binaries for quick A/B runs with the device tool: builds them in
# build-bundle (configured as scripts/bundle.sh does), strips them into .device/NAME/bin,
# xz-packs that into .device/NAME.txz (~9 MB for the default four), copies the non-CUDA
# shared libraries they need into .device/lib and writes .device/unpack.sh. Every path is
# under .device/ (git-ignored). Build a second variant after changing the code, then time
# both in one device call.
#
#   bash scripts/device_pack.sh NAME [target ...]   # default: attention_bench engine_bench
#                                                   #          attention_gpu_test engine_cuda_test
#   then: run(carry=[".device/A.txz", ".device/B.txz", ".device/lib", ".device/unpack.sh",
#                    ".device/run1.sh"], command="bash .device/run1.sh")
#   where run1.sh starts with   VERSIONS="A B" source .device/unpack.sh
#   and runs /tmp/b/A/bin/<binary> and /tmp/b/B/bin/<binary> alternately.
#
# The whole bundle (every GPU test and benchmark, ~45 MB unpacked) is scripts/bundle.sh's job.
# Before spending device time on a kernel change, scripts/sass_report.py compares the two builds' SASS and
# lists the tile loops' lengths and spills.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 NAME [target ...]" >&2; exit 2; }
name=$1
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(attention_bench engine_bench attention_gpu_test engine_cuda_test)
BUILD=build-bundle
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBANYAN_STATIC_DEPS=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${BANYAN_CUDA_ARCHS:-90a-real;90}" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
fi
ninja -C "$BUILD" "${targets[@]}"
out=.device/$name
rm -rf "$out" "$out.txz"
mkdir -p "$out/bin"
for t in "${targets[@]}"; do
  bin=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "no binary for target $t" >&2; exit 1; }
  strip -o "$out/bin/$t" "$bin"
done
source scripts/runtime_libs.sh
copy_runtime_libs .device/lib "$out"/bin/*
git rev-parse HEAD > "$out/commit.txt" 2>/dev/null || true
git diff --stat > "$out/diff_stat.txt" 2>/dev/null || true
tar -C .device -cf - "$name" | xz -T0 -6 > "$out.txz"
cat > .device/unpack.sh <<'EOF'
# Sourced on the device machine: VERSIONS="A B" source .device/unpack.sh
# Unpacks each .device/NAME.txz into /tmp/b/NAME (bin/, commit.txt, diff_stat.txt) and puts
# .device/lib on the library path; prints the GPU's name and clocks.
mkdir -p /tmp/b
for v in $VERSIONS; do [ -d "/tmp/b/$v" ] || tar -xJf ".device/$v.txz" -C /tmp/b; done
export LD_LIBRARY_PATH=$PWD/.device/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
EOF
du -h "$out.txz" | awk '{print "[device_pack] " $1 " in '"$out.txz"'"}'
