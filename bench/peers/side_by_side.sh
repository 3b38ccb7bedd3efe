#!/usr/bin/env bash
# Issue 4's side-by-side device run, one call: attention GPU test (+ racecheck, memcheck), then
# attention_bench (every column of the sweep), then attention_peers.py (SDPA per sequence, Hydragen as
# published, FlashInfer's MultiLevelCascadeAttentionWrapper), then ncu kernel durations of the two
# 64-leaf shapes. FlashInfer's JIT (minutes, cold) is built in the background while the correctness
# checks run; nothing is timed until it is done. Runs on the GPU machine from the repo root:
#   run(carry=["BUNDLE", ".whl"], command="bash bench/peers/side_by_side.sh BUNDLE")
# BUNDLE holds bin/attention_gpu_test, bin/attention_bench, lib/libbenchmark.so.1debian, commit.txt.
# Outputs go to $OUT (at most 8 files come back): bench.json, bench_onelaunch.json, peers.jsonl, table.md,
# logs.tgz (every log). CHECKS_ONLY=1 runs the test and sanitizers only, SKIP_CHECKS=1 everything else
# (two calls when one would pass the device tool's 10 minutes). The table:
#   python3 bench/peers/attention_table.py $OUT/bench.json $OUT/peers.jsonl
set -o pipefail
BUNDLE=${1:?bundle dir}
OUT=${OUT:-/tmp/side_by_side}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib
B=$BUNDLE/bin
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; cat "$BUNDLE/commit.txt"
export PYTHONPATH=/tmp/site FLASHINFER_WORKSPACE_BASE=/tmp/fiws MAX_JOBS=8 CUDA_HOME=/usr/local/cuda PYTHONUNBUFFERED=1
FI="--fi-methods cascade,cascade_2level"
(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && python3 bench/peers/attention_peers.py --warm-fi $FI) > "$OUT/warm_fi.log" 2>&1 &
WARM=$!
if [ -z "${SKIP_CHECKS:-}" ]; then  # SKIP_CHECKS=1: benchmarks and peers only (the checks ran in an earlier call)
t0=$(date +%s)
timeout 300 "$B/attention_gpu_test" --gtest_color=no > "$OUT/gpu_test.log" 2>&1; echo "gpu_test rc=$? $(( $(date +%s) - t0 ))s"
grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/gpu_test.log" | head; grep -oE " rel_err [0-9.e+-]+" "$OUT/gpu_test.log" | sort -k2 -g | tail -1
t0=$(date +%s)
export BANYAN_ATTENTION_TEST_CONFIGS=auto,narrow,narrow-fused,narrow-plain-unchained  # no cooperative launch
timeout 150 "$CS" --tool racecheck --print-limit 5 "$B/attention_gpu_test" --gtest_filter='*TreeAttentionGpuTest.MatchesReference/2' > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$? $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/racecheck.log"
t0=$(date +%s)
timeout 90 "$CS" --tool memcheck --print-limit 5 "$B/attention_gpu_test" --gtest_filter='*GraphCapture*:*MatchesReference/2:*MatchesReference/13' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$? $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/memcheck.log"
t0=$(date +%s)
BANYAN_ATTENTION_TEST_CONFIGS=auto-onelaunch,narrow-onelaunch timeout 60 "$CS" --tool memcheck --print-limit 5 \
  "$B/attention_gpu_test" --gtest_filter='*GraphCapture*:*TreeAttentionGpuTest.MatchesReference/2:*TreeAttentionGpuTest.MatchesReference/13' > "$OUT/memcheck_onelaunch.log" 2>&1
echo "memcheck onelaunch rc=$? $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/memcheck_onelaunch.log"
unset BANYAN_ATTENTION_TEST_CONFIGS
t0=$(date +%s)  # the TMA kernel (kTma, with and without ping-pong) and the wgmma kernel: case 0 (GQA 8:1) and 9 (prefill)
timeout 150 "$CS" --tool memcheck --print-limit 5 "$B/attention_gpu_test" --gtest_filter='*TreeWgmmaGpuTest.MatchesReference/0:*TreeWgmmaGpuTest.MatchesReference/9' > "$OUT/memcheck_tma.log" 2>&1
echo "memcheck tma rc=$? $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/memcheck_tma.log"
t0=$(date +%s)
timeout 150 "$CS" --tool racecheck --print-limit 5 "$B/attention_gpu_test" --gtest_filter='*TreeWgmmaGpuTest.MatchesReference/9' > "$OUT/racecheck_tma.log" 2>&1
echo "racecheck tma rc=$? $(( $(date +%s) - t0 ))s"; tail -2 "$OUT/racecheck_tma.log"
fi
[ -n "${CHECKS_ONLY:-}" ] && { kill $WARM 2>/dev/null; (cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log); exit 0; }
wait $WARM; echo "warm rc=$?"; tail -2 "$OUT/warm_fi.log"
t0=$(date +%s)
# The one-launch (cooperative, grid-barrier) column runs in its own invocation, last.
timeout 330 "$B/attention_bench" --benchmark_filter='^attn/(tree|narrow|wgmma|tma|tmapp|c64|c256|plain|nochain|perseq|flat)/' \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1
echo "bench rc=$? $(( $(date +%s) - t0 ))s"; sed -n '/^shape (bf16/,$p' "$OUT/bench.log"
timeout 60 "$B/attention_bench" --benchmark_filter='^attn/onelaunch/' \
  --benchmark_out="$OUT/bench_onelaunch.json" --benchmark_out_format=json > "$OUT/bench_onelaunch.log" 2>&1
echo "bench onelaunch rc=$?"
t0=$(date +%s)
python3 bench/peers/attention_peers.py $FI --max-seconds 240 --jsonl "$OUT/peers.jsonl" > "$OUT/peers.log" 2>&1
echo "peers rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^ceilings|^total" "$OUT/peers.log"
python3 bench/peers/attention_table.py "$OUT/bench.json,$OUT/bench_onelaunch.json" "$OUT/peers.jsonl" > "$OUT/table.md"
grep -E "^h|^Ceil" "$OUT/table.md"
t0=$(date +%s)
for s in "tree/h8/1 L64 P2048 S64" "narrow/h8/1 L64 P2048 S64" "tree/h32/8 L64 P2048 S64" "tree/h8/1 probe"; do
  echo "== $s"
  timeout 60 "$NCU" --clock-control none --metrics gpu__time_duration.sum -k 'regex:Persistent|Merge' -c 6 \
    "$B/attention_bench" --benchmark_filter="attn/$s" 2>&1 | grep -E "Persistent|Merge|gpu__time_duration" | tail -6
done > "$OUT/ncu.log" 2>&1; echo "ncu $(( $(date +%s) - t0 ))s"; cat "$OUT/ncu.log"
# The device tool returns at most 8 files: the logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log); ls "$OUT"
