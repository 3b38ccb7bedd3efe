#!/usr/bin/env python3
"""Joins one device run's attention_bench JSON and attention_peers.py JSON lines into the markdown
table of bench/RESULTS.md ("attention (GPU)"): every shape's time per column and its ratios.

  python3 bench/peers/attention_table.py BENCH_JSON[,BENCH_JSON...] PEERS_JSONL > table.md

Columns: each attention_bench column (benchmark names attn/<column>/<shape>; median_us counter),
the floor from the peers run's measured ceilings (same machine and run; the bench's own floor with
fixed ceilings where the peers run lacks the shape), then ratios of the default column (`tree`):
x floor, baseline (perseq) / tree, and each peer / tree (Hydragen as published, CUDA graph; SDPA
per sequence; FlashInfer's cascade). A ratio above 1 means ours is faster. The peers' two-level runs
(hydragen_2level, fi_cascade_2level) pair with our `as2lvl 8x2560/128x256` row, the same tree; our other
two-level view (`as2lvl 2048/1024x768`) has no peer run. The last lines give three levels against each
two-level view.
"""
import json
import re
import sys


def peer_name(ours):
    """Our shape name -> (peer shape name, suffix of the peer method for the two-level view)."""
    m = re.match(r"(h\d+/\d+) L(\d+) (P\d+ S\d+)$", ours)
    if m:
        return f"{m.group(1)} n{m.group(2)} {m.group(3)}", ""
    m = re.match(r"(h\d+/\d+) 3lvl ", ours)
    if m:
        return f"{m.group(1)} 3lvl 2048+8x512+1024x256", ""
    m = re.match(r"(h\d+/\d+) as2lvl 8x2560/", ours)  # the peers' two-level view of the three-level tree
    if m:
        return f"{m.group(1)} 3lvl 2048+8x512+1024x256", "_2level"
    return None, ""  # (as2lvl 2048/1024x768, the other two-level view, has no peer run)


def main():
    benches = []
    for path in sys.argv[1].split(","):
        try:
            benches += json.load(open(path))["benchmarks"]
        except (OSError, ValueError) as e:
            print(f"(skipped {path}: {e})", file=sys.stderr)
    ours, order, cols = {}, [], []
    for b in benches:
        parts = re.sub(r"/iterations:.*$", "", b["name"]).split("/", 2)
        if len(parts) < 3 or "median_us" not in b:
            continue
        col, shape = parts[1], parts[2]
        if shape not in ours:
            ours[shape] = {}
            order.append(shape)
        if col not in cols:
            cols.append(col)
        ours[shape][col] = b["median_us"]
        ours[shape]["_floor"] = b["floor_us"]
    peers, ceil = {}, {}
    for line in open(sys.argv[2]):
        r = json.loads(line)
        if r.get("kind") == "ceilings":
            ceil = r
        if r.get("kind") != "result" or r.get("status") != "ok":
            continue
        peers.setdefault(r["shape"], {})[r["method"]] = r["median_ms"] * 1e3
    peer_cols = [("hydragen_graph", "Hydragen (graph)"), ("sdpa_per_seq", "SDPA per-seq"),
                 ("fi_cascade", "FI cascade")]
    head = ["shape (bf16, D=128)"] + cols + ["floor", "tree/floor"]
    if "perseq" in cols:
        head.append("perseq/tree")
    for _, title in peer_cols:
        head += [title, title.split(" ")[0] + "/tree"]
    print("| " + " | ".join(head) + " |")
    print("| --- " + "| ---: " * (len(head) - 1) + "|")
    fmt = lambda v: "-" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:.0f}")
    rat = lambda a, b: "-" if (a is None or b is None or b <= 0) else f"{a / b:.2f}"
    for shape in order:
        row = ours[shape]
        pname, suffix = peer_name(shape)
        pr = peers.get(pname, {})
        floor = pr.get("floor") if not suffix else None  # the peers have no floor of the 2-level view
        if floor is None:
            floor = row["_floor"]
        tree = row.get("tree")
        cells = [shape] + [fmt(row.get(c)) for c in cols] + [fmt(floor), rat(tree, floor)]
        if "perseq" in cols:
            cells.append(rat(row.get("perseq"), tree))
        for method, _ in peer_cols:
            v = pr.get(method + suffix) if not suffix or method != "sdpa_per_seq" else None
            if suffix and method == "hydragen_graph":
                v = pr.get("hydragen_2level_graph")
            cells += [fmt(v), rat(v, tree)]
        print("| " + " | ".join(cells) + " |")
    if ceil:
        print(f"\nCeilings measured in the peers run: HBM copy {ceil['hbm_TBps']:.2f} TB/s, "
              f"bf16 GEMM {ceil['gemm_TFLOPs']:.0f} TFLOP/s.")
    for h in ("h8/1", "h32/8"):
        three = next((ours[s].get("tree") for s in order if s.startswith(h + " 3lvl")), None)
        views = [(s[len(h + " as2lvl "):], ours[s].get("tree")) for s in order if s.startswith(h + " as2lvl ")]
        for view, two in views if three else []:
            if two:
                print(f"{h}: the tree as two levels ({view}) / three levels = {two:.1f} / {three:.1f} = "
                      f"{two / three:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
