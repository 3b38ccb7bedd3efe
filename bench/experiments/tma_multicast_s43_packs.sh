#!/usr/bin/env bash
# Builds the three packs that bench/experiments/tma_multicast_s43_check.sh times (git-ignored, under .device/):
#   HEAD_PACK       HEAD's kernels: attention_bench
#   PAIR_PACK       with pair_steps_d128_s42.patch: attention_bench attention_gpu_test
#   MULTICAST_PACK  with tma_multicast_d128_s43.patch (multicast off unless BANYAN_BENCH_MULTICAST=1):
#                   attention_bench attention_gpu_test
# and leaves the working tree as it found it (each patch is reversed after its pack). ~7 min on a fresh 2-core
# machine (build-bundle configured on the first pack). Then:
#   run(carry=[".device/HEAD_PACK.txz", ".device/PAIR_PACK.txz", ".device/MULTICAST_PACK.txz", ".device/lib",
#              ".device/unpack.sh"], command="bash bench/experiments/tma_multicast_s43_check.sh HEAD_PACK PAIR_PACK MULTICAST_PACK")
#
#   bash bench/experiments/tma_multicast_s43_packs.sh [HEAD_PACK PAIR_PACK MULTICAST_PACK]   # default: h p m
set -euo pipefail
cd "$(dirname "$0")/../.."
head=${1:-h}
pair=${2:-p}
mc=${3:-m}
dir=bench/experiments
if ! git diff --quiet -- attention; then
  echo "attention/ has uncommitted changes: commit or stash them first" >&2
  exit 1
fi
bash scripts/device_pack.sh "$head" attention_bench
for build in "$pair:pair_steps_d128_s42.patch" "$mc:tma_multicast_d128_s43.patch"; do
  name=${build%%:*}
  patch=$dir/${build#*:}
  git apply "$patch"
  status=0
  bash scripts/device_pack.sh "$name" attention_bench attention_gpu_test || status=$?
  git apply -R "$patch"
  [ "$status" -eq 0 ] || exit "$status"
done
ls -la .device/*.txz
