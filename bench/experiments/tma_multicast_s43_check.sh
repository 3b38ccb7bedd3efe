#!/usr/bin/env bash
# The device calls that decide bench/experiments/pair_steps_d128_s42.patch and
# bench/experiments/tma_multicast_d128_s43.patch together (PERF_NOTES session 43), in two calls of ~5-6 min each
# (PHASE `measure`, the default: items 1-3; PHASE `sanitize`: item 4, once the builds win):
#   1. the multicast build's GPU tests: MulticastPairsMatchTheReferenceEveryStep (a hang there is the barriers'
#      accounting) and RandomPlans (multicast off: the patch's other kernels must be unchanged);
#   2. the pair build's RandomPlans (a hang is pair_steps' release count);
#   3. the tree sweep's S64 / three-level D 128 rows: HEAD, pairs, the multicast build off and on
#      (BANYAN_BENCH_MULTICAST=1), alternating, two rounds (scripts/device_ab.sh), and the headline's multicast counter;
#   4. compute-sanitizer memcheck and racecheck on the multicast test, memcheck on three random-plan cases of the pair
#      build.
# Packs, built here first (git-ignored, under .device/; at most ~64 MiB carried in all):
#   bash scripts/device_pack.sh HEAD_PACK attention_bench
#   git apply bench/experiments/pair_steps_d128_s42.patch
#   bash scripts/device_pack.sh PAIR_PACK attention_bench attention_gpu_test
#   git checkout attention/kernels
#   git apply bench/experiments/tma_multicast_d128_s43.patch
#   bash scripts/device_pack.sh MULTICAST_PACK attention_bench attention_gpu_test
#   git apply -R bench/experiments/tma_multicast_d128_s43.patch
# Then on the device:
#   run(carry=[".device/HEAD_PACK.txz", ".device/PAIR_PACK.txz", ".device/MULTICAST_PACK.txz", ".device/lib",
#              ".device/unpack.sh"],
#       command="bash bench/experiments/tma_multicast_s43_check.sh HEAD_PACK PAIR_PACK MULTICAST_PACK [sanitize]")
set -uo pipefail
[ $# -eq 3 ] || [ $# -eq 4 ] || { echo "usage: $0 HEAD_PACK PAIR_PACK MULTICAST_PACK [measure|sanitize]" >&2; exit 2; }
head=$1
pair=$2
mc=$3
phase=${4:-measure}
VERSIONS="$head $pair $mc" source .device/unpack.sh
W=${OUT:-.}
t0=$(date +%s)
stamp() { echo "[t+$(($(date +%s) - t0))s] $*"; }
# gtest LABEL SECONDS COMMAND...: runs a gtest binary (or a sanitizer over one) into $W/LABEL.txt, prints its exit
# status (124: timed out, e.g. a hang) and its summary lines.
gtest() {
  local label=$1 seconds=$2
  shift 2
  timeout "$seconds" "$@" > "$W/$label.txt" 2>&1
  echo "$label rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$W/$label.txt" | tr '\n' ' ')"
  stamp "$label"
}
measure() {
  gtest mc_gpu_test 150 "/tmp/b/$mc/bin/attention_gpu_test" --gtest_filter='*Multicast*:*RandomPlans*'
  grep -E '^\[ step \]|Failure' "$W/mc_gpu_test.txt" | head -16
  gtest pair_gpu_test 120 "/tmp/b/$pair/bin/attention_gpu_test" --gtest_filter='*RandomPlans*'
  bash scripts/device_ab.sh 2 '^attn/tree/h(8/1|32/8) (L[0-9]+ P[0-9]+ S64|3lvl)' "$head" "$pair" "$mc" \
    "$mc+BANYAN_BENCH_MULTICAST=1" | tee "$W/ab_table.txt"
  stamp sweep
  BANYAN_BENCH_MULTICAST=1 BANYAN_BENCH_ORDERED_PAGES=1 timeout 40 "/tmp/b/$mc/bin/attention_bench" \
    --benchmark_filter='h32/8 L256 P16384 S64' 2>&1 | grep -E '^attn' | tr ' ' '\n' | grep -E 'multicast|median|items' |
    tr '\n' ' '
  echo
}
sanitize() {
  for tool in memcheck racecheck; do
    gtest "mc_$tool" 120 compute-sanitizer --tool "$tool" "/tmp/b/$mc/bin/attention_gpu_test" --gtest_filter='*Multicast*'
  done
  gtest pair_memcheck 150 compute-sanitizer --tool memcheck "/tmp/b/$pair/bin/attention_gpu_test" \
    --gtest_filter='*RandomPlans*/1:*RandomPlans*/3:*RandomPlans*/22'
}
case "$phase" in
  measure) measure ;;
  sanitize) sanitize ;;
  *) echo "unknown phase $phase (measure or sanitize)" >&2; exit 2 ;;
esac
stamp done
