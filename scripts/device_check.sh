#!/usr/bin/env bash
# Runs on the GPU machine, from the bundle: every GPU test, then every GPU benchmark, and
# prints a short summary table last. Full logs and benchmark JSON go to $OUT when set.
#
#   bundle/bin/device_check.sh [--tests-only | --bench-only] [--filter REGEX]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
LOGS=${OUT:-/tmp/banyan-device}
# Tests that read reference data from the source tree find it here (the bundle sits in the
# checkout's root on the device machine).
export BANYAN_SOURCE_DIR=${BANYAN_SOURCE_DIR:-$(dirname "$ROOT")}
mkdir -p "$LOGS"
mode=all; filter=.
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only) mode=tests ;;
    --bench-only) mode=bench ;;
    --filter) filter=$2; shift ;;
  esac
  shift
done

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "device: ${gpu:-unknown}   date: $(date -u +%Y-%m-%dT%H:%MZ)   commit: $(cat "$ROOT/share/banyan/commit.txt" 2>/dev/null)"
summary=()
failed=0
if [ "$mode" != bench ]; then
  while read -r t; do
    [ -n "$t" ] && [[ "$t" =~ $filter ]] || continue
    [ -x "$HERE/$t" ] || { summary+=("$(printf '%-28s absent from this bundle' "$t")"); continue; }
    start=$(date +%s%N)
    "$HERE/$t" --gtest_color=no > "$LOGS/$t.log" 2>&1
    rc=$?
    secs=$(( ($(date +%s%N) - start) / 1000000000 ))
    passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$LOGS/$t.log" | tail -1)
    skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+' "$LOGS/$t.log" | tail -1)
    nfail=$(grep -oP '\[  FAILED  \] \K[0-9]+(?= test)' "$LOGS/$t.log" | tail -1)
    [ $rc -ne 0 ] && failed=1 && grep -E '^\[  FAILED  \]|Failure|error' "$LOGS/$t.log" | head -20
    summary+=("$(printf '%-28s %-6s passed %-4s failed %-4s skipped %-4s %6ss' "$t" \
      "$([ $rc -eq 0 ] && echo OK || echo FAIL)" "${passed:-0}" "${nfail:-0}" "${skipped:-0}" "$secs")")
  done < "$ROOT/share/banyan/gpu_tests.txt"
fi
if [ "$mode" != tests ]; then
  while read -r b; do
    [ -n "$b" ] && [[ "$b" =~ $filter ]] || continue
    [ -x "$HERE/$b" ] || { summary+=("$(printf '%-28s absent from this bundle' "$b")"); continue; }
    "$HERE/$b" --benchmark_counters_tabular=true --benchmark_out="$LOGS/$b.json" \
      --benchmark_out_format=json > "$LOGS/$b.log" 2>&1
    rcb=$?
    grep -vE '^\*\*\*|^-+$' "$LOGS/$b.log" | tail -40
    [ $rcb -ne 0 ] && failed=1
    summary+=("$(printf '%-28s %-6s (see %s.json)' "$b" "$([ $rcb -eq 0 ] && echo OK || echo FAIL)" "$b")")
  done < "$ROOT/share/banyan/gpu_benches.txt"
fi
echo
echo "==== summary: ${gpu:-unknown} ===="
printf '%s\n' "${summary[@]}"
exit $failed
