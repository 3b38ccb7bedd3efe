#!/usr/bin/env python3
"""Peer timings for tree (shared-prefix) decode attention, for issue 4's comparison.

For every shape of the sweep (q/KV heads 8/1 and 32/8; leaves 64, 256, 1024; prefix 2048 and
16384; suffix 64 and 512; head dim 128; bf16) and the three-level shape (2048 shared by all;
8 problems x 512 shared by 128 samples each; 256-token suffixes), one query token per leaf:

  *_graph           the method captured once in a CUDA graph and replayed (no Python launch
                    overhead; the eager numbers at small shapes are mostly launch latency).
  sdpa_per_seq      PyTorch SDPA, flash backend, every leaf's full sequence materialized as its
                    own KV (the per-sequence baseline); skipped, with the bytes it needs, when it
                    does not fit. The q heads of a KV group are passed as the query rows of that
                    KV head (same math as GQA, the strongest form of this baseline).
  hydragen          Hydragen as published: per tree level, one flash call in which the queries of
                    all leaves below a node are the "sequence" dimension (no mask) against that
                    node's KV, each returning its log-sum-exp (aten._scaled_dot_product_flash_
                    attention), then the LSE merge in PyTorch (eager, as in the paper's code).
  hydragen_2level   three-level shape only: the same tree with its first two levels materialized
                    as one (8 nodes of 2560 tokens), i.e. the tree treated as two levels.
  fi_cascade        FlashInfer MultiLevelCascadeAttentionWrapper (paged KV, HND, page 16), one
                    level per tree level; plan() outside the timed region (it is per step, shared
                    by all layers).
  fi_cascade_2level three-level shape only: FlashInfer with the tree treated as two levels.
  fi_decode_paged   FlashInfer BatchDecodeWithPagedKVCacheWrapper (tensor cores), every leaf's
                    page list = its ancestors' pages + its own (pages shared, not copied, but
                    read once per leaf): a paged per-sequence decode.
  floor             max(min bytes / measured HBM copy rate, FLOPs / measured bf16 GEMM rate);
                    both ceilings are measured at the start of the same run.

Timing: triton.testing.do_bench (CUDA events; it clears a 256 MB buffer before every call, so
no input is served from L2), median. Inputs are fresh randn, never zeros.
Correctness: each method's output is compared with an fp32 reference computed from the same
bf16 inputs on a sample of leaves (rel_err_fp32 = max over sampled leaves of ||o-ref||/||ref||),
and with hydragen on every leaf (rel_vs_hydragen, same metric over all leaves).

Prints one JSON line per (shape, method) and a table at the end; --jsonl also writes the lines
to a file. Run on the GPU machine: see bench/peers/README.md.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

D = 128
PAGE = 16
DT = torch.bfloat16
DEV = "cuda"


def emit(rec, sink):
    line = json.dumps(rec)
    print(line, flush=True)
    if sink:
        sink.write(line + "\n")
        sink.flush()


def bench(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


# ----------------------------------------------------------------------------- ceilings
def measure_ceilings():
    n = 1 << 30  # 1 Gi bf16 elements = 2 GiB each way
    a = torch.randn(n, device=DEV, dtype=DT)
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    bw = 2 * a.numel() * a.element_size() / (ms * 1e-3)
    del a, b
    torch.cuda.empty_cache()
    m = 8192
    x = torch.randn(m, m, device=DEV, dtype=DT)
    y = torch.randn(m, m, device=DEV, dtype=DT)
    z = torch.empty(m, m, device=DEV, dtype=DT)
    ms_g = bench(lambda: torch.mm(x, y, out=z))
    flops = 2 * m ** 3 / (ms_g * 1e-3)
    del x, y, z
    torch.cuda.empty_cache()
    return {"hbm_copy_bytes_per_s": bw, "copy_ms": ms, "gemm_flops_per_s": flops,
            "gemm_ms": ms_g}


# ----------------------------------------------------------------------------- problem
class Problem:
    """A uniform tree: level l has m_l nodes of L_l tokens; leaves are split evenly under them.

    Leaves are numbered so that the leaves below one node are contiguous. Q is [n, Hq, D];
    K[l], V[l] are [m_l, Hkv, L_l, D]. Query head h reads KV head h // (Hq / Hkv).
    """

    def __init__(self, name, hq, hkv, n, levels, seed):
        self.name, self.hq, self.hkv, self.n, self.levels = name, hq, hkv, n, levels
        self.g = hq // hkv
        self.scale = 1.0 / math.sqrt(D)
        gen = torch.Generator(device=DEV).manual_seed(seed)
        self.q = torch.randn(n, hq, D, device=DEV, dtype=DT, generator=gen)
        self.k = [torch.randn(m, hkv, L, D, device=DEV, dtype=DT, generator=gen) for m, L in levels]
        self.v = [torch.randn(m, hkv, L, D, device=DEV, dtype=DT, generator=gen) for m, L in levels]

    def node_of_leaf(self, lvl):
        m = self.levels[lvl][0]
        return torch.arange(self.n, device=DEV) // (self.n // m)

    def total_len(self):
        return sum(L for _, L in self.levels)

    def collapsed_first_two(self):
        """The same tree with levels 0 and 1 materialized as one level (for the 2-level view)."""
        (m0, L0), (m1, L1) = self.levels[0], self.levels[1]
        p = Problem.__new__(Problem)
        p.__dict__.update(self.__dict__)
        p.levels = [(m1, L0 + L1)] + self.levels[2:]
        idx = torch.arange(m1, device=DEV) // (m1 // m0)
        p.k = [torch.cat([self.k[0][idx], self.k[1]], dim=2)] + self.k[2:]
        p.v = [torch.cat([self.v[0][idx], self.v[1]], dim=2)] + self.v[2:]
        return p

    def min_bytes(self):
        kv = sum(2 * m * L * self.hkv * D * 2 for m, L in self.levels)
        return kv + 2 * self.n * self.hq * D * 2

    def flops(self):
        return 4 * self.n * self.hq * D * self.total_len()

    def reference(self, leaves):
        """fp32 attention for the given leaves, from the same bf16 inputs: [len(leaves), Hq, D]."""
        outs = []
        for i in leaves:
            ks = torch.cat([self.k[l][i // (self.n // m)].float() for l, (m, _) in enumerate(self.levels)], 1)
            vs = torch.cat([self.v[l][i // (self.n // m)].float() for l, (m, _) in enumerate(self.levels)], 1)
            q = self.q[i].float().view(self.hkv, self.g, D)
            s = torch.einsum("hgd,htd->hgt", q, ks) * self.scale
            o = torch.einsum("hgt,htd->hgd", torch.softmax(s, -1), vs)
            outs.append(o.reshape(self.hq, D))
        return torch.stack(outs)


def rel_err(o, ref):
    """max over leaves of ||o_i - ref_i|| / ||ref_i||."""
    o = o.float().reshape(o.shape[0], -1)
    ref = ref.float().reshape(ref.shape[0], -1)
    r = (o - ref).norm(dim=1) / ref.norm(dim=1)
    return float(r.max()) if torch.isfinite(r).all() else float("nan")


# ----------------------------------------------------------------------------- (a) SDPA
def sdpa_per_seq(p, free_bytes):
    need = 2 * p.n * p.hkv * p.total_len() * D * 2
    if need > 0.92 * free_bytes:
        return None, f"does not fit: needs {need / 2**30:.1f} GiB of per-leaf KV, {free_bytes / 2**30:.1f} GiB free"
    ks = torch.empty(p.n, p.hkv, p.total_len(), D, device=DEV, dtype=DT)
    vs = torch.empty_like(ks)
    off = 0
    for l, (m, L) in enumerate(p.levels):  # broadcast copies: no temporary of the full size
        per = p.n // m
        ks[:, :, off:off + L].view(m, per, p.hkv, L, D).copy_(p.k[l].unsqueeze(1).expand(m, per, p.hkv, L, D))
        vs[:, :, off:off + L].view(m, per, p.hkv, L, D).copy_(p.v[l].unsqueeze(1).expand(m, per, p.hkv, L, D))
        off += L
    q = p.q.view(p.n, p.hkv, p.g, D)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def run():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, ks, vs, scale=p.scale)

    return (run, lambda o: o.reshape(p.n, p.hq, D), {"kv_bytes_materialized": need}), None


# ----------------------------------------------------------------------------- (b) Hydragen
def flash_with_lse(q, k, v, scale):
    out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)
    return out[0], out[1]


def hydragen(p):
    n, hkv, g = p.n, p.hkv, p.g

    def run():
        outs, lses = [], []
        for l, (m, _) in enumerate(p.levels):
            per = n // m
            q = p.q.view(m, per, hkv, g, D).permute(0, 2, 1, 3, 4).reshape(m, hkv, per * g, D)
            o, lse = flash_with_lse(q, p.k[l], p.v[l], p.scale)
            outs.append(o.reshape(m, hkv, per, g, D).permute(0, 2, 1, 3, 4).reshape(n, p.hq, D))
            lses.append(lse.reshape(m, hkv, per, g).permute(0, 2, 1, 3).reshape(n, p.hq))
        lse = torch.stack(lses)
        w = torch.exp(lse - lse.max(0).values)
        acc = sum(w[i].unsqueeze(-1) * outs[i].float() for i in range(len(outs)))
        return (acc / w.sum(0).unsqueeze(-1)).to(DT)

    return (run, lambda o: o, {}), None


# ----------------------------------------------------------------------------- (c) FlashInfer
def paged_cache(p):
    """KV of every node in pages of PAGE tokens, HND layout: [pages, 2, Hkv, PAGE, D]."""
    chunks, bases, base = [], [], 0
    for l, (m, L) in enumerate(p.levels):
        pp = L // PAGE
        k = p.k[l].view(m, p.hkv, pp, PAGE, D).permute(0, 2, 1, 3, 4).reshape(m * pp, p.hkv, PAGE, D)
        v = p.v[l].view(m, p.hkv, pp, PAGE, D).permute(0, 2, 1, 3, 4).reshape(m * pp, p.hkv, PAGE, D)
        chunks.append(torch.stack([k, v], dim=1))
        bases.append(base)
        base += m * pp
    return torch.cat(chunks), bases


def fi_cascade(p, fi, workspace, graph_mode=False):
    cache, bases = paged_cache(p)
    i32 = dict(device=DEV, dtype=torch.int32)
    qo, kvp, kvi, last = [], [], [], []
    for l, (m, L) in enumerate(p.levels):
        pp = L // PAGE
        qo.append(torch.arange(m + 1, **i32) * (p.n // m))
        kvp.append(torch.arange(m + 1, **i32) * pp)
        kvi.append(bases[l] + torch.arange(m * pp, **i32))
        last.append(torch.full((m,), PAGE, **i32))
    if graph_mode:  # FlashInfer's CUDA-graph mode: plan() writes into these fixed buffers
        w = fi.MultiLevelCascadeAttentionWrapper(
            len(p.levels), workspace, "HND", use_cuda_graph=True,
            qo_indptr_buf_arr=[x.clone() for x in qo], paged_kv_indptr_buf_arr=[x.clone() for x in kvp],
            paged_kv_indices_buf_arr=[x.clone() for x in kvi],
            paged_kv_last_page_len_buf_arr=[x.clone() for x in last])
    else:
        w = fi.MultiLevelCascadeAttentionWrapper(len(p.levels), workspace, "HND")
    w.plan(qo, kvp, kvi, last, p.hq, p.hkv, D, PAGE, causal=False, sm_scale=p.scale,
           q_data_type=DT, kv_data_type=DT)
    q = p.q.contiguous()
    return (lambda: w.run(q, cache), lambda o: o, {"cache_bytes": cache.numel() * 2}), None


def fi_decode_paged(p, fi, workspace):
    cache, bases = paged_cache(p)
    idx = []
    for l, (m, L) in enumerate(p.levels):
        pp = L // PAGE
        node = torch.arange(p.n, device=DEV) // (p.n // m)
        idx.append(bases[l] + node[:, None] * pp + torch.arange(pp, device=DEV)[None, :])
    idx = torch.cat(idx, 1)
    per = idx.shape[1]
    i32 = dict(device=DEV, dtype=torch.int32)
    w = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, "HND", use_tensor_cores=True)
    w.plan(torch.arange(p.n + 1, **i32) * per, idx.flatten().to(torch.int32),
           torch.full((p.n,), PAGE, **i32), p.hq, p.hkv, D, PAGE, sm_scale=p.scale,
           q_data_type=DT, kv_data_type=DT)
    q = p.q.contiguous()
    return (lambda: w.run(q, cache), lambda o: o, {}), None


# ----------------------------------------------------------------------------- CUDA graphs
def graphed(built):
    """The same method captured once in a CUDA graph and replayed: no Python launch overhead."""
    if built[0] is None:
        return built
    fn, to_nhd, extra = built[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay():
        graph.replay()
        return out

    return (replay, to_nhd, {**extra, "cuda_graph": True}), None


# ----------------------------------------------------------------------------- driver
def shapes(quick):
    out = []
    heads = [(8, 1), (32, 8)]
    for hq, hkv in heads:
        for n in ([64, 256] if quick else [64, 256, 1024]):
            for P in ([2048, 16384]):
                for S in ([64] if quick else [64, 512]):
                    out.append((f"h{hq}/{hkv} n{n} P{P} S{S}", hq, hkv, n, [(1, P), (n, S)]))
        out.append((f"h{hq}/{hkv} 3lvl 2048+8x512+1024x256", hq, hkv, 1024,
                    [(1, 2048), (8, 512), (1024, 256)]))
    return out


def probe():
    info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "cuda": torch.version.cuda}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        info["triton"] = f"missing: {e}"
    # The flash op that returns the LSE: check both outputs against fp32 math.
    g = torch.Generator(device=DEV).manual_seed(7)
    q = torch.randn(2, 3, 37, D, device=DEV, dtype=DT, generator=g)
    k = torch.randn(2, 3, 301, D, device=DEV, dtype=DT, generator=g)
    v = torch.randn(2, 3, 301, D, device=DEV, dtype=DT, generator=g)
    try:
        o, lse = flash_with_lse(q, k, v, 1 / math.sqrt(D))
        s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(D)
        ref_lse = torch.logsumexp(s, -1)
        ref_o = torch.softmax(s, -1) @ v.float()
        info["flash_lse_op"] = {"op": "aten._scaled_dot_product_flash_attention",
                                "lse_shape": list(lse.shape), "lse_dtype": str(lse.dtype),
                                "lse_max_abs_err": float((lse - ref_lse).abs().max()),
                                "out_rel_err": float((o.float() - ref_o).norm() / ref_o.norm())}
    except Exception as e:  # noqa: BLE001
        info["flash_lse_op"] = f"failed: {type(e).__name__}: {e}"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q.repeat(1, 4, 1, 1), k, v, enable_gqa=True)
        info["sdpa_flash_enable_gqa"] = "ok"
    except Exception as e:  # noqa: BLE001
        info["sdpa_flash_enable_gqa"] = f"failed: {type(e).__name__}: {str(e)[:200]}"
    return info


def load_flashinfer():
    try:
        import flashinfer
        return flashinfer, f"flashinfer {flashinfer.__version__}"
    except Exception as e:  # noqa: BLE001
        return None, f"import failed: {type(e).__name__}: {str(e)[:400]}"


def warm_flashinfer(fi_methods):
    """Builds (or loads from the JIT cache) the FlashInfer modules of fi_methods: one tiny run each."""
    t0 = time.time()
    fi, status = load_flashinfer()
    print(json.dumps({"kind": "warm_fi", "flashinfer": status, "import_s": time.time() - t0}), flush=True)
    if fi is None:
        return 1
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device=DEV)
    # Same head counts, dtypes and page size as the sweep: the JIT module depends on those, not on sizes.
    for hq, hkv in [(8, 1), (32, 8)]:
        p = Problem("warm", hq, hkv, 8, [(1, 64), (2, 32), (8, 16)], seed=1)
        for name, make in [("cascade", lambda: fi_cascade(p, fi, workspace)),
                           ("decode_paged", lambda: fi_decode_paged(p, fi, workspace))]:
            if name not in fi_methods and not (name == "cascade" and "cascade_2level" in fi_methods):
                continue
            t = time.time()
            try:
                built, _ = make()
                built[0]()
                torch.cuda.synchronize()
                st = "ok"
            except Exception as e:  # noqa: BLE001
                st = f"error: {type(e).__name__}: {str(e)[:300]}"
            print(json.dumps({"kind": "warm_fi", "method": name, "hq": hq, "hkv": hkv, "status": st,
                              "seconds": time.time() - t}), flush=True)
    print(json.dumps({"kind": "warm_fi", "total_s": time.time() - t0}), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a few shapes only")
    ap.add_argument("--jsonl", help="also write the JSON lines here")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--max-seconds", type=float, default=420, help="stop starting new shapes after this")
    ap.add_argument("--filter", default="", help="substring a shape name must contain")
    ap.add_argument("--fi-methods", default="cascade,cascade_2level,decode_paged",
                    help="comma list of FlashInfer methods to run: cascade, cascade_2level, decode_paged "
                         "(each compiles its own JIT module on first use)")
    ap.add_argument("--warm-fi", action="store_true",
                    help="only build FlashInfer's JIT modules for --fi-methods (one tiny problem each, no "
                         "timing) and exit: run it in the background while other GPU work is timed")
    ap.add_argument("--fi-graph", action="store_true",
                    help="also FlashInfer cascade in its use_cuda_graph mode, captured (not yet run on "
                         "the device; capturing the plain wrapper hit an illegal address there)")
    args = ap.parse_args()
    t_start = time.time()
    fi_methods = set(m for m in args.fi_methods.split(",") if m)
    if args.warm_fi:
        return warm_flashinfer(fi_methods)
    sink = open(args.jsonl, "w") if args.jsonl else None
    torch.backends.cuda.matmul.allow_tf32 = False

    info = probe()
    fi, fi_status = (None, "disabled") if args.no_flashinfer else load_flashinfer()
    info["flashinfer"] = fi_status
    info["date_utc"] = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    emit({"kind": "env", **info}, sink)
    ceil = measure_ceilings()
    emit({"kind": "ceilings", **ceil, "hbm_TBps": ceil["hbm_copy_bytes_per_s"] / 1e12,
          "gemm_TFLOPs": ceil["gemm_flops_per_s"] / 1e12}, sink)
    workspace = torch.empty(512 << 20, dtype=torch.uint8, device=DEV) if fi else None

    table = []
    dead = False
    for si, (name, hq, hkv, n, levels) in enumerate(shapes(args.quick)):
        if args.filter not in name:
            continue
        if time.time() - t_start > args.max_seconds:
            emit({"kind": "stopped", "reason": f"--max-seconds {args.max_seconds} reached before {name}"}, sink)
            break
        p = Problem(name, hq, hkv, n, levels, seed=100 + si)
        floor_ms = 1e3 * max(p.min_bytes() / ceil["hbm_copy_bytes_per_s"], p.flops() / ceil["gemm_flops_per_s"])
        base = {"kind": "result", "shape": name, "hq": hq, "hkv": hkv, "leaves": n,
                "levels": levels, "head_dim": D, "dtype": "bf16", "floor_ms": floor_ms,
                "min_bytes": p.min_bytes(), "flops": p.flops()}
        emit({**base, "method": "floor", "median_ms": floor_ms, "status": "ok",
              "bound": "bytes" if p.min_bytes() / ceil["hbm_copy_bytes_per_s"] >
              p.flops() / ceil["gemm_flops_per_s"] else "flops"}, sink)
        sample = sorted({0, n // 3, n // 2 + 1, n - 1})
        ref = p.reference(sample)
        methods = [("hydragen", lambda: hydragen(p)), ("hydragen_graph", lambda: graphed(hydragen(p)))]
        if len(levels) > 2:
            p2 = p.collapsed_first_two()
            methods.append(("hydragen_2level", lambda: hydragen(p2)))
            methods.append(("hydragen_2level_graph", lambda: graphed(hydragen(p2))))
        methods.append(("sdpa_per_seq", lambda: sdpa_per_seq(p, torch.cuda.mem_get_info()[0])))
        if fi:
            if "cascade" in fi_methods:
                methods.append(("fi_cascade", lambda: fi_cascade(p, fi, workspace)))
            if args.fi_graph:
                methods.append(("fi_cascade_graph", lambda: graphed(fi_cascade(p, fi, workspace, True))))
            if len(levels) > 2 and "cascade_2level" in fi_methods:
                methods.append(("fi_cascade_2level", lambda: fi_cascade(p2, fi, workspace)))
            if "decode_paged" in fi_methods:
                methods.append(("fi_decode_paged", lambda: fi_decode_paged(p, fi, workspace)))
        hyd_out = None
        row = {"shape": name, "floor": floor_ms}
        for mname, make in methods:
            rec = {**base, "method": mname}
            try:
                built, why = make()
                if built is None:
                    emit({**rec, "status": f"skipped: {why}"}, sink)
                    row[mname] = None
                    continue
                fn, to_nhd, extra = built
                poison = to_nhd(fn())
                poison.fill_(float("nan"))  # a method that does not write its output fails below
                out = to_nhd(fn())
                torch.cuda.synchronize()
                err = rel_err(out[sample], ref)
                vs_h = rel_err(out, hyd_out) if hyd_out is not None else 0.0
                if mname == "hydragen":
                    hyd_out = out.clone()
                ms = bench(fn)
                rec.update({"status": "ok", "median_ms": ms, "x_floor": ms / floor_ms,
                            "rel_err_fp32": err, "rel_vs_hydragen": vs_h, **extra})
                row[mname] = ms
                row[mname + "_err"] = max(err, vs_h)
            except Exception as e:  # noqa: BLE001
                rec.update({"status": f"error: {type(e).__name__}: {str(e)[:300]}"})
                row[mname] = None
                if os.environ.get("PEERS_TRACE"):
                    traceback.print_exc()
                if isinstance(e, torch.AcceleratorError):  # the CUDA context is gone: stop here
                    emit(rec, sink)
                    dead = True
                    break
            emit(rec, sink)
            del rec
            torch.cuda.empty_cache()
        table.append(row)
        if dead:
            emit({"kind": "stopped", "reason": "CUDA error; the context cannot be used further"}, sink)
            break
        del p, ref, hyd_out
        if len(levels) > 2:
            del p2
        torch.cuda.empty_cache()

    cols = ["floor", "hydragen", "hydragen_graph", "hydragen_2level_graph", "sdpa_per_seq", "fi_cascade",
            "fi_cascade_graph", "fi_cascade_2level", "fi_decode_paged"]
    print(f"\nceilings: HBM copy {ceil['hbm_copy_bytes_per_s'] / 1e12:.2f} TB/s, "
          f"bf16 GEMM {ceil['gemm_flops_per_s'] / 1e12:.0f} TFLOP/s; {info['device']}; {fi_status}")
    print("median ms (max rel err vs fp32 ref / vs hydragen in brackets when > 1e-2)")
    print(f"{'shape':40s}" + "".join(f"{c[:15]:>16s}" for c in cols))
    for r in table:
        cells = []
        for c in cols:
            v = r.get(c)
            if v is None:
                cells.append(f"{'-' if c not in r else 'skip':>16s}")
            else:
                e = r.get(c + "_err", 0)
                cells.append(f"{v:>10.4f}" + (f"[{e:.0e}]" if e > 1e-2 else "      "))
        print(f"{r['shape']:40s}" + "".join(cells))
    print(f"total {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
