"""Long-context decode peers for bench/long_decode_bench.cc (DESIGN.md "Stream-K long-context decode").

A few sequences of 32K-256K tokens, one query token each, 32 query / 8 KV heads of 128, bf16, the
same shapes as long_decode_bench. Methods:
  fi_decode_tc   FlashInfer BatchDecodeWithPagedKVCacheWrapper, tensor cores, paged HND, page 16
                 (its own split-KV planning)
  fi_decode      the same wrapper on CUDA cores (use_tensor_cores=False)
  sdpa           torch SDPA (flash backend where it takes the call) on contiguous [B, H, N, D] KV
Timing: triton.testing.do_bench median (a 256 MB buffer cleared before each call). Every method's
output is compared with the fp32 reference of the first sequence. One JSON line per measurement.

  python3 bench/peers/long_decode_peers.py [--jsonl F] [--no-flashinfer]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_peers import bench, emit  # noqa: E402  (one JSON line per measurement; do_bench median)

HQ, HKV, D, PAGE = 32, 8, 128, 16
DT = torch.bfloat16
DEV = "cuda"
SHAPES = [(b, n) for b in (1, 2, 3, 4, 8, 16, 24) for n in (32768, 65536, 131072, 262144)
          if not (b > 8 and n > 65536)]


def reference_first(q, k, v, scale):
    """fp32 attention of sequence 0, every query head: [HQ, D]."""
    qf = q[0].float()                       # [HQ, D]
    kf = k[0].float().repeat_interleave(HQ // HKV, 0)  # [HQ, N, D]
    vf = v[0].float().repeat_interleave(HQ // HKV, 0)
    s = torch.einsum("hd,hnd->hn", qf, kf) * scale
    return torch.einsum("hn,hnd->hd", torch.softmax(s, -1), vf)


def rel_err(o, ref):
    return float((o.float() - ref).norm() / ref.norm())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jsonl")
    ap.add_argument("--no-flashinfer", action="store_true")
    args = ap.parse_args()
    sink = open(args.jsonl, "w") if args.jsonl else None
    fi = None
    if not args.no_flashinfer:
        t = time.time()
        try:
            import flashinfer as fi
            emit({"kind": "flashinfer", "version": fi.__version__, "import_s": time.time() - t}, sink)
        except Exception as e:  # noqa: BLE001
            emit({"kind": "flashinfer", "error": f"{type(e).__name__}: {str(e)[:300]}"}, sink)
    torch.manual_seed(0)
    scale = D ** -0.5
    workspace = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    for b, n in SHAPES:
        name = f"B{b} N{n // 1024}K"
        q = torch.randn(b, HQ, D, device=DEV, dtype=DT)
        k = torch.randn(b, HKV, n, D, device=DEV, dtype=DT)
        v = torch.randn(b, HKV, n, D, device=DEV, dtype=DT)
        ref = reference_first(q, k, v, scale)
        kv_bytes = 2 * b * n * HKV * D * 2
        methods = {}
        methods["sdpa"] = lambda: F.scaled_dot_product_attention(q[:, :, None, :], k, v, scale=scale,
                                                                 enable_gqa=True)[:, :, 0, :]
        if fi is not None:
            pages = n // PAGE
            # [B * pages, 2, HKV, PAGE, D]: page p of sequence s holds tokens [16p, 16p + 16).
            cache = torch.empty(b * pages, 2, HKV, PAGE, D, device=DEV, dtype=DT)
            cache[:, 0] = k.view(b, HKV, pages, PAGE, D).permute(0, 2, 1, 3, 4).reshape(b * pages, HKV, PAGE, D)
            cache[:, 1] = v.view(b, HKV, pages, PAGE, D).permute(0, 2, 1, 3, 4).reshape(b * pages, HKV, PAGE, D)
            i32 = dict(device=DEV, dtype=torch.int32)
            for tag, tc in (("fi_decode_tc", True), ("fi_decode", False)):
                try:
                    w = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, "HND", use_tensor_cores=tc)
                    w.plan(torch.arange(b + 1, **i32) * pages, torch.arange(b * pages, **i32),
                           torch.full((b,), PAGE, **i32), HQ, HKV, D, PAGE, sm_scale=scale,
                           q_data_type=DT, kv_data_type=DT)
                    methods[tag] = (lambda w=w: w.run(q, cache))
                except Exception as e:  # noqa: BLE001
                    emit({"shape": name, "method": tag, "error": f"{type(e).__name__}: {str(e)[:300]}"}, sink)
        for tag, fn in methods.items():
            try:
                out = fn()
                torch.cuda.synchronize()
                err = rel_err(out[0], ref)
                ms = bench(fn)
                emit({"shape": name, "method": tag, "us": ms * 1e3, "tb_per_s": kv_bytes / (ms * 1e-3) / 1e12,
                      "rel_err": err}, sink)
            except Exception as e:  # noqa: BLE001
                emit({"shape": name, "method": tag, "error": f"{type(e).__name__}: {str(e)[:300]}"}, sink)
        del q, k, v, methods
        if fi is not None:
            del cache
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
