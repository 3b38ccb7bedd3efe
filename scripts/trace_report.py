#!/usr/bin/env python3
"""Summarizes per-CTA trace dumps of the TMA tree kernel (attention/kernels/params.cuh).

Two sources write the same words, one line per CTA, "<key>|<cta>|w0|w1|...":
  - attention_bench with BANYAN_BENCH_TRACE=1 BANYAN_BENCH_TRACE_DUMP=<file>: keys "<variant> <shape>" and
    "merge <variant> <shape>"; timer words 0, 2, 3 (merge CTAs 0-2) already relative to the first CTA's start;
  - the engine diag build (bench/experiments/engine_trace_diag_s34.patch): keys "item pass P layer L" and
    "merge pass P layer L", every word raw; its word 18 is when the CTA's dependency wait returned; with
    heavy_start_trace_s35.patch also words 20-27, the heavy CTAs' start chain (kernels/params.cuh in that patch),
    with heavy_start_trace_s36.patch also 28-29 (the items warp and the KV producer reaching their code).

  python3 scripts/trace_report.py DUMP [DUMP ...]

Per key: heavy CTAs (those that ran or passed TMA items) and light CTAs, their start, dependency release (word 18,
where written), first item done, end (median / max, us after the first CTA started), the SM clock they ran at
(clock64 over globaltimer), the heavy items' count, tiles and us per tile, and the merge grid's dependency release and
end.
"""
import statistics
import sys


def median(values):
    return statistics.median(values) if values else float("nan")


def load(path):
    rows = {}
    for line in open(path):
        fields = line.rstrip("\n").split("|")
        rows.setdefault(fields[0], []).append([int(x) for x in fields[2:]])
    return rows


def is_heavy(w):
    # Words 10 / 17: items of more than 64 rows / passed items; 11: ns in small items (a light CTA writes 12 only).
    return w[10] + w[17] > 0 or w[11] > 0


def report(key, items, merges):
    raw = key.startswith("item pass")  # the engine diag's words are absolute
    t0 = min(w[0] for w in items) if raw else 0

    def us(t):
        return (t - t0) / 1e3

    heavy = [w for w in items if is_heavy(w)]
    light = [w for w in items if not is_heavy(w)]
    print(f"{key}: {len(heavy)} heavy CTAs, {len(light)} light")
    for name, group in (("heavy", heavy), ("light", light)):
        if not group:
            continue
        release = [us(w[18]) for w in group if w[18]]
        clock = [(w[6] - w[4]) / (w[3] - w[0]) for w in group if w[3] > w[0]]
        line = f"  {name:5s} start {median([us(w[0]) for w in group]):6.2f}"
        if release:
            line += f"  released {median(release):6.2f}"
        line += (f"  first done {median([us(w[2]) for w in group]):6.2f}  end {median([us(w[3]) for w in group]):6.2f}"
                 f" (max {max(us(w[3]) for w in group):6.2f})  {median(clock):.3f} GHz")
        print(line)
        if len(group[0]) >= 28:  # the start-chain diag (bench/experiments/heavy_start_trace_s35.patch; s36: 28, 29)
            names = ("range", "barrier", "item", "entries", "window", "tma", "q", "k0", "items entry", "kv entry")
            parts = []
            for word, label in enumerate(names[: len(group[0]) - 20], start=20):  # s35's dumps stop at word 27
                stamps = [us(w[word]) for w in group if w[word] > t0]
                if stamps:
                    parts.append(f"{label} {median(stamps):.2f}")
            print("        start chain: " + ", ".join(parts))
        big = [w for w in group if w[10] > 0]
        if name == "heavy" and big:
            print(f"        items {sorted(set(w[10] for w in big))} per CTA, {median([w[13] for w in big])} tiles,"
                  f" {median([w[9] / 1e3 for w in big]):.2f} us in items,"
                  f" {median([w[9] / 1e3 / w[13] for w in big if w[13]]):.3f} us per tile")
    if merges:
        print(f"  merge released {median([us(w[1]) for w in merges]):6.2f}  end max {max(us(w[2]) for w in merges):6.2f}")


def main(paths):
    for path in paths:
        rows = load(path)
        for key in rows:
            if key.startswith("merge"):
                continue
            merge_key = "merge" + key[4:] if key.startswith("item pass") else "merge " + key
            report(key, rows[key], rows.get(merge_key, []))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
