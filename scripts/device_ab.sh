#!/usr/bin/env bash
# On the device machine: attention_bench rows of several device_pack.sh builds, alternating build by build for
# ROUNDS rounds (write flush, ordered pages), then a side-by-side table (scripts/ab_rows.py; the first build is
# the baseline). Rows go to $OUT/ab_rows.txt (or ./ab_rows.txt without $OUT).
#
#   VERSIONS="h43 p43" source .device/unpack.sh     # the packs, unpacked into /tmp/b/NAME
#   bash scripts/device_ab.sh 2 '^attn/tree/' h43 p43
#
# A BUILD may carry environment settings after a '+': NAME+VAR=VALUE[+VAR=VALUE...] runs NAME's attention_bench
# with them and labels its rows with the whole spec, e.g. one pack with a bench switch off and on:
#   bash scripts/device_ab.sh 2 '^attn/tree/' m43 m43+BANYAN_BENCH_MULTICAST=1
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS FILTER BUILD[+VAR=VALUE...] [BUILD ...]" >&2; exit 2; }
rounds=$1
filter=$2
shift 2
out=${OUT:-.}/ab_rows.txt
: > "$out"
for ((r = 1; r <= rounds; ++r)); do
  for spec in "$@"; do
    build=${spec%%+*}
    settings=()
    [ "$spec" = "$build" ] || IFS='+' read -r -a settings <<< "${spec#"$build"+}"
    env ${settings[@]+"${settings[@]}"} BANYAN_BENCH_ORDERED_PAGES=1 timeout 300 "/tmp/b/$build/bin/attention_bench" \
      --benchmark_filter="$filter" 2>/dev/null |
      awk -v b="$spec" -v r="$r" '/^attn\// {
        name = ""
        for (i = 1; i <= NF && $i !~ /^[0-9.]+$/; ++i) name = name (name == "" ? "" : " ") $i
        sub(/\/iterations.*/, "", name)
        for (i = 1; i <= NF; ++i) if ($i ~ /^median_us=/) print b " r" r " " name " " $i
      }' >> "$out"
    echo "[device_ab] $spec round $r: $(grep -c -F "$spec r$r " "$out") rows"
  done
done
python3 "$(dirname "$0")/ab_rows.py" "$out"
