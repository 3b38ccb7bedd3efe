#!/usr/bin/env bash
# Times two-level trees at forced light-CTA counts and prefix chunk counts, for bench/light_split_fit (the split's
# rates fitted to the measurements). Run it on the device with an attention_bench binary:
#
#   bash scripts/light_sweep.sh ATTENTION_BENCH [COUNTS] [SHAPES] [CHUNKS] > sweep.txt
#     COUNTS: light-CTA counts to force, space-separated (default "0 18 29 36 46 58 68 80")
#     SHAPES: leaves x prefix x suffix, comma-separated: h32/8 head dim 64 trees, attention_bench's engine rows
#             (default: the 16 shapes of bench/light_sweep_h100_s35.txt)
#     CHUNKS: about how many split-K chunks the prefix gets with light CTAs, space-separated (default "0": the
#             cost model's; BANYAN_BENCH_LIGHT_CHUNKS); count 0 (no light CTAs) runs once whatever CHUNKS says
#   LIGHT_SWEEP_ROWS=issue: the bench's issue rows instead of SHAPES (h32/8 and h8/1 at head dim 128: leaves 64,
#             256, 1,024, prefixes 2K and 16K, suffixes 64 and 512; the headline and the small shape among them)
#   then here: build/bench/light_split_fit sweep.txt
#
# Each (count, chunks) pair is one attention_bench process over every shape (read flush, ordered pages, medians of
# 20 Runs); the output lines are "q_heads kv_heads head_dim leaves prefix suffix light_ctas chunks median_us",
# chunks as the plan got it.
set -euo pipefail
bench=${1:?usage: $0 ATTENTION_BENCH [COUNTS] [SHAPES] [CHUNKS]}
counts=${2:-0 18 29 36 46 58 68 80}
shapes=${3:-256x2048x8,256x2048x64,256x2048x120,1024x16384x64,1024x1024x8,1024x1024x128,1024x2048x8,1024x2048x64,1024x2048x128,1024x4096x8,1024x4096x64,1024x4096x128,1024x8192x128,256x16384x512,64x2048x112,256x2048x512}
chunk_counts=${4:-0}
if [ "${LIGHT_SWEEP_ROWS:-engine}" = issue ]; then
  filter='^attn/tree/h(32/8|8/1) L[0-9]+ P[0-9]+ S[0-9]+/'
else
  filter='^attn/tree/h32/8 D64 L[0-9]+ P[0-9]+ S[0-9]+ \(engine\)/'
fi
echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%FT%TZ), $bench"
for n in $counts; do
  for c in $chunk_counts; do
    [ "$n" != 0 ] || [ "$c" = "${chunk_counts%% *}" ] || continue
    BANYAN_BENCH_ORDERED_PAGES=1 BANYAN_BENCH_FLUSH=read BANYAN_BENCH_LIGHT_CTAS=$n BANYAN_BENCH_LIGHT_CHUNKS=$c \
      BANYAN_BENCH_ENGINE_SUFFIXES=$shapes "$bench" --benchmark_filter="$filter" 2>/dev/null |
      awk -v n="$n" '/^attn\/tree\/h[0-9]+\/[0-9]+ / {
        split($1, name, "/"); q = substr(name[3], 2); kv = name[4]
        d = 128; shape = ""; us = ""; chunks = ""
        for (i = 2; i <= NF; ++i) {
          t = $i; sub(/\/.*/, "", t)
          if (t ~ /^D[0-9]+$/) d = substr(t, 2)
          else if (t ~ /^L[0-9]+$/) shape = substr(t, 2)
          else if (t ~ /^[PS][0-9]+$/) shape = shape " " substr(t, 2)
          else if ($i ~ /^median_us=/) us = substr($i, 11)
          else if ($i ~ /^chunks=/) chunks = substr($i, 8)
        }
        if (us ~ /k$/) { sub(/k$/, "", us); us = us * 1000 }
        if (split(shape, parts, " ") == 3) print q, kv, d, shape, n, chunks, us
      }'
  done
done
