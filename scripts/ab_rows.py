#!/usr/bin/env python3
"""Side-by-side table of attention_bench rows timed by several builds (scripts/device_ab.sh writes the input).

Input lines: "<build> r<round> <benchmark name> median_us=<value>" (the value may end in k, as Google Benchmark's
counters print thousands). Per row: every build's medians in round order, and each build's median over rounds divided
by the first build's (the baseline).

  python3 scripts/ab_rows.py ROWS_FILE
"""
import collections
import statistics
import sys


def parse_us(text):
    value = text.split("=", 1)[1]
    return float(value[:-1]) * 1000.0 if value.endswith("k") else float(value)


def main(path):
    rows = collections.OrderedDict()
    builds = []
    for line in open(path):
        parts = line.split()
        if len(parts) < 4 or not parts[-1].startswith("median_us="):
            continue
        build, name = parts[0], " ".join(parts[2:-1])
        if build not in builds:
            builds.append(build)
        rows.setdefault(name, collections.defaultdict(list))[build].append(parse_us(parts[-1]))
    if not builds:
        sys.exit(f"{path}: no rows")
    base = builds[0]
    for name, by in rows.items():
        cells = "  ".join(f"{b} " + "/".join(f"{x:.1f}" for x in by[b]) for b in builds if by[b])
        ratios = ""
        if by[base]:
            ref = statistics.median(by[base])
            ratios = "  ".join(f"{b}/{base} {statistics.median(by[b]) / ref:.3f}" for b in builds[1:] if by[b])
        print(f"{name:48s} {cells}  {ratios}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
