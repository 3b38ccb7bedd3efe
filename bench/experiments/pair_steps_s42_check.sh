#!/usr/bin/env bash
# The device call that decides pair_steps_d128_s42.patch (PERF_NOTES session 42 item 7), in one run:
#   1. micro_tile128's ring forms (ringpairs64x5 against ring64x5 / ring128x3);
#   2. the patched build's GPU tests (a hang in attention_gpu_test is a release-count bug: its log says which case);
#   3. the attention tree sweep, HEAD and patched alternating, two rounds (scripts/device_ab.sh);
#   4. the engine's 256 x 2K decode step, both builds, two rounds;
#   5. compute-sanitizer memcheck and racecheck on three random-plan cases of the patched build.
# Packs, built here first (git-ignored, under .device/):
#   bash scripts/device_pack.sh HEAD_PACK attention_bench engine_bench micro_tile128
#   git apply bench/experiments/pair_steps_d128_s42.patch
#   bash scripts/device_pack.sh PAIR_PACK attention_bench engine_bench attention_gpu_test engine_cuda_test
#   git checkout attention/kernels
# Then on the device:
#   run(carry=[".device/HEAD_PACK.txz", ".device/PAIR_PACK.txz", ".device/lib", ".device/unpack.sh"],
#       command="bash bench/experiments/pair_steps_s42_check.sh HEAD_PACK PAIR_PACK")
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 HEAD_PACK PAIR_PACK" >&2; exit 2; }
head=$1
pair=$2
VERSIONS="$head $pair" source .device/unpack.sh
W=${OUT:-.}
t0=$(date +%s)
stamp() { echo "[t+$(($(date +%s) - t0))s] $*"; }
timeout 60 "/tmp/b/$head/bin/micro_tile128" 4096 132 ring 2>&1 | grep -E "rep 1|FAILED" | tee "$W/micro.txt"
stamp micro
timeout 200 "/tmp/b/$pair/bin/attention_gpu_test" > "$W/attention_gpu_test.txt" 2>&1
echo "attention_gpu_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$W/attention_gpu_test.txt" | tr '\n' ' ')"
timeout 200 "/tmp/b/$pair/bin/engine_cuda_test" > "$W/engine_cuda_test.txt" 2>&1
echo "engine_cuda_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$W/engine_cuda_test.txt" | tr '\n' ' ')"
stamp tests
bash scripts/device_ab.sh 2 '^attn/tree/' "$head" "$pair" | tee "$W/ab_table.txt"
stamp sweep
for round in 1 2; do
  for build in "$head" "$pair"; do
    BANYAN_BENCH_REPEATS=2 timeout 120 "/tmp/b/$build/bin/engine_bench" \
      --benchmark_filter='BM_Decode/mode:0/branches:256/prefix:2048/sampled:0/' --benchmark_counters_tabular=true \
      > "$W/engine_${build}_$round.txt" 2>&1
    stamp "engine $build $round: $(grep -E '^BM_Decode' "$W/engine_${build}_$round.txt" | head -1 | tr -s ' ' | cut -c1-200)"
  done
done
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool "$tool" "/tmp/b/$pair/bin/attention_gpu_test" \
    --gtest_filter='*RandomPlans*/1:*RandomPlans*/3:*RandomPlans*/22' > "$W/$tool.txt" 2>&1
  echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$W/$tool.txt" | tr '\n' ' ')"
done
stamp done
