#!/usr/bin/env python3
"""Where does the CUDA backend's bf16 error come from? A numpy model of its numerics.

The CUDA backend (model/cuda/cuda_backend.cc) rounds to bf16 at fixed points of the forward pass;
this script replays the Llama / Qwen2 forward pass of a tiny HF checkpoint (tests/hf/data/
tiny_models/NAME) in float64 and rounds (round-to-nearest-even, as __float2bfloat16_rn does) only at
the points named on the command line. It then counts top-1 agreement with transformers' fp32
reference (long_top1.bin) over the 8 x 128 long positions and reports the logits' relative L2
error on the short sequences, so one can see which rounding points cost agreement.

Rounding points (names for --round; "all" = every one):
  weights  every matrix rounded to bf16 (exact for checkpoints saved in bf16)
  normw    RMSNorm weights rounded to bf16
  norm     RMSNorm output (the GEMM input) in bf16
  qkv      q/k/v GEMM output in bf16 (before bias and RoPE)
  bias     q/k/v after the bias add in bf16
  rope     rotated q and k (and the KV cache) in bf16
  v        the cached V in bf16 (the KV pool is bf16)
  p        softmax probabilities in bf16 before P.V (the tensor-core product)
  attn     attention output in bf16 (the o_proj input)
  proj     o_proj / down_proj outputs in bf16 before the fp32 residual add
  gu       gate|up GEMM output in bf16
  act      SwiGLU output (the down_proj input) in bf16
  final    final RMSNorm output (the LM head input) in bf16
  fsplit   LM head input as bf16 hi + bf16 lo (two products; cancels 'final')
  wsplit   every matrix as bf16 hi + bf16 lo, hi = bf16(w), lo = bf16(w - hi) (~16 bits; not in
           'all'; replaces 'weights': CudaBackendOptions::weights = Weights::kSplitBf16)

The CUDA backend's modes as rounding sets (--sets takes these names too):
  mode:bf16    weights+norm+act+final+rope+v+p+attn      (GEMM outputs, norm weights, bias: fp32)
  mode:split   weights+rope+v+p+attn+fsplit              (split activations)
  mode:high    wsplit+rope+v+p+attn+fsplit               (split activations and split weights)

Usage: python3 tests/hf/bf16_error_sources.py [--round all] [--model NAME ...] [--ablate]
  --ablate: for each point, all points except that one (what removing one rounding buys).
Needs numpy only.

  python3 tests/hf/bf16_error_sources.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --ids IDS.json ...
replays the default model instead (needs the `gguf` package to dequantize): the reference is this
script's own unrounded float64 forward pass (what the fp32 CPU backend computes), the sequences
those of tests/hf/data/smollm2_gguf plus any in IDS.json (a list of token-id lists).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

POINTS = ["weights", "normw", "norm", "qkv", "bias", "rope", "v", "p", "attn", "proj", "gu",
          "act", "final"]
MODES = {"mode:bf16": "attn+act+final+norm+p+rope+v+weights",
         "mode:split": "attn+p+rope+v+weights+fsplit",
         "mode:high": "attn+p+rope+v+wsplit+fsplit"}
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "tiny_models")


def bf16(x):
    """Round-to-nearest-even to bf16, returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def load_safetensors(folder):
    tensors = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        body = raw[8 + n:]
        for key, info in header.items():
            if key == "__metadata__":
                continue
            a, b = info["data_offsets"]
            chunk = body[a:b]
            if info["dtype"] == "BF16":
                u = np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16
                arr = u.view(np.float32)
            elif info["dtype"] == "F32":
                arr = np.frombuffer(chunk, dtype="<f4")
            else:
                raise ValueError(info["dtype"])
            tensors[key] = arr.astype(np.float64).reshape(info["shape"])
    return tensors


def inv_freq(ref):
    rope = ref["rope_parameters"]
    d = ref["head_dim"]
    inv = 1.0 / (rope["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if rope.get("rope_type") == "llama3":
        factor, lo, hi = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old = rope["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        mid = (1 - smooth) * inv / factor + smooth * inv
        is_mid = (wavelen >= old / hi) & (wavelen <= old / lo)
        inv = np.where(is_mid, mid, scaled)
    return inv.astype(np.float32).astype(np.float64)  # the backend keeps an fp32 table


def forward(w, ref, ids, rnd, fsplit=False):
    """Logits [len, vocab] for one causal sequence, rounding at the points in `rnd`."""
    r = (lambda name, x: bf16(x) if name in rnd else x)
    H, nq, nkv, D = ref["hidden_size"], ref["num_q_heads"], ref["num_kv_heads"], ref["head_dim"]
    eps = ref["rms_norm_eps"]
    def W(k):
        if "wsplit" in rnd:
            hi = bf16(w[k])
            return hi + bf16(w[k] - hi)
        return r("weights", w[k])
    NW = lambda k: r("normw", w[k])

    def norm(h, weight):
        return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * weight

    T = len(ids)
    h = W("model.embed_tokens.weight")[ids]
    inv = inv_freq(ref)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    ang = ang.astype(np.float32).astype(np.float64)
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # x [T, heads, D]
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(ref["num_layers"]):
        p = f"model.layers.{layer}."
        x = r("norm", norm(h, NW(p + "input_layernorm.weight")))
        q = r("qkv", x @ W(p + "self_attn.q_proj.weight").T)
        k = r("qkv", x @ W(p + "self_attn.k_proj.weight").T)
        v = r("qkv", x @ W(p + "self_attn.v_proj.weight").T)
        if p + "self_attn.q_proj.bias" in w:
            q = r("bias", q + r("weights", w[p + "self_attn.q_proj.bias"]))
            k = r("bias", k + r("weights", w[p + "self_attn.k_proj.bias"]))
            v = r("bias", v + r("weights", w[p + "self_attn.v_proj.bias"]))
        q = r("rope", rope(q.reshape(T, nq, D)))
        k = r("rope", rope(k.reshape(T, nkv, D)))
        v = r("v", v.reshape(T, nkv, D))
        g = nq // nkv
        out = np.empty((T, nq, D))
        for head in range(nq):
            s = q[:, head] @ k[:, head // g].T / np.sqrt(D) + mask
            e = np.exp(s - s.max(-1, keepdims=True))
            l = e.sum(-1, keepdims=True)
            out[:, head] = (r("p", e) @ v[:, head // g]) / l
        a = r("attn", out.reshape(T, nq * D))
        h = h + r("proj", a @ W(p + "self_attn.o_proj.weight").T)
        x = r("norm", norm(h, NW(p + "post_attention_layernorm.weight")))
        gate = r("gu", x @ W(p + "mlp.gate_proj.weight").T)
        up = r("gu", x @ W(p + "mlp.up_proj.weight").T)
        act = r("act", gate / (1 + np.exp(-gate)) * up)
        h = h + r("proj", act @ W(p + "mlp.down_proj.weight").T)
    x = norm(h, NW("model.norm.weight"))
    head = W("lm_head.weight") if "lm_head.weight" in w else W("model.embed_tokens.weight")
    if fsplit:
        hi = bf16(x)
        return hi @ head.T + bf16(x - hi) @ head.T
    return r("final", x) @ head.T


def evaluate(name, rnd, fsplit=False):
    folder = os.path.join(DATA, name)
    ref = json.load(open(os.path.join(folder, "reference.json")))
    w = load_safetensors(folder)
    V = ref["vocab_size"]
    seqs, long_seqs = ref["seqs"], ref["long_seqs"]
    want = np.fromfile(os.path.join(folder, "logits.bin"), dtype="<f4").reshape(len(seqs), -1, V)
    worst = 0.0
    for i, s in enumerate(seqs):
        got = forward(w, ref, s, rnd, fsplit)
        err = np.linalg.norm(got - want[i], axis=-1) / np.linalg.norm(want[i], axis=-1)
        worst = max(worst, float(err.max()))
    n, L = len(long_seqs), len(long_seqs[0])
    raw = open(os.path.join(folder, "long_top1.bin"), "rb").read()
    top1 = np.frombuffer(raw[:n * L * 4], dtype="<i4").reshape(n, L)
    top2 = np.frombuffer(raw[n * L * 4:], dtype="<f4").reshape(n, L, 2)
    agree, margins_missed = 0, []
    for i, s in enumerate(long_seqs):
        got = forward(w, ref, s, rnd, fsplit).argmax(-1)
        ok = got == top1[i]
        agree += int(ok.sum())
        margins_missed += [float(top2[i, t, 0] - top2[i, t, 1]) for t in np.nonzero(~ok)[0]]
    return {"model": name, "round": "+".join(sorted(rnd)) + ("+fsplit" if fsplit else ""),
            "rel_l2": float(f"{worst:.3e}"), "top1": f"{agree}/{n * L}",
            "top1_pct": round(100.0 * agree / (n * L), 2),
            "missed_margins": sorted(round(m, 5) for m in margins_missed)}


def load_gguf(path):
    """The GGUF's tensors dequantized, under HF names (q/k rows back in HF's RoPE layout)."""
    import gguf
    reader = gguf.GGUFReader(path)
    field = lambda k: reader.fields[k].parts[reader.fields[k].data[0]][0]
    ref = {"hidden_size": int(field("llama.embedding_length")),
           "num_q_heads": int(field("llama.attention.head_count")),
           "num_kv_heads": int(field("llama.attention.head_count_kv")),
           "num_layers": int(field("llama.block_count")),
           "rms_norm_eps": float(field("llama.attention.layer_norm_rms_epsilon")),
           "rope_parameters": {"rope_theta": float(field("llama.rope.freq_base"))}}
    ref["head_dim"] = ref["hidden_size"] // ref["num_q_heads"]
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
             "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    w = {}
    for t in reader.tensors:
        parts = t.name.split(".")
        arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        arr = arr.reshape([int(x) for x in reversed(t.shape)]) if arr.ndim > 1 or len(t.shape) > 1 else arr
        if parts[0] == "blk":
            base, kind = f"model.layers.{parts[1]}.", parts[2]
            if kind in ("attn_q", "attn_k"):  # undo llama.cpp's interleaving of each head's halves
                heads = ref["num_q_heads"] if kind == "attn_q" else ref["num_kv_heads"]
                D = ref["head_dim"]
                arr = arr.reshape(heads, D // 2, 2, -1).swapaxes(1, 2).reshape(heads * D, -1)
            w[base + names[kind] + ".weight"] = arr
        else:
            w[names[parts[0]] + ".weight"] = arr
    return w, ref


def evaluate_gguf(w, ref, seqs, rnd, fsplit=False, cache={}):
    agree, positions, errs = 0, 0, []
    for i, s in enumerate(seqs):
        if i not in cache:
            cache[i] = forward(w, ref, s, set())
        want = cache[i]
        got = forward(w, ref, s, rnd, fsplit)
        agree += int((want.argmax(-1) == got.argmax(-1)).sum())
        positions += len(s)
        errs += list(np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1))
    return {"model": "gguf", "round": "+".join(sorted(rnd)) + ("+fsplit" if fsplit else ""),
            "rel_l2_median": float(f"{np.median(errs):.3e}"), "rel_l2_max": float(f"{max(errs):.3e}"),
            "top1": f"{agree}/{positions}", "top1_pct": round(100.0 * agree / positions, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf")
    ap.add_argument("--ids", help="JSON list of token-id lists, added to the GGUF reference's")
    ap.add_argument("--sets", nargs="*", default=[], help="with --gguf: rounding sets, each '+'-joined")
    ap.add_argument("--model", nargs="*", default=["llama_gqa4_untied", "llama_odd_heads_tied",
                                                    "llama3_rope_mha_f32", "qwen2_bias_tied"])
    ap.add_argument("--round", nargs="*", default=["all"])
    ap.add_argument("--fsplit", action="store_true")
    ap.add_argument("--ablate", action="store_true")
    args = ap.parse_args()
    rnd = set(POINTS) if "all" in args.round else set(args.round)
    if args.gguf:
        w, ref = load_gguf(args.gguf)
        seqs = [s["ids"] for s in json.load(open(os.path.join(HERE, "data", "smollm2_gguf",
                                                               "reference.json")))["seqs"]]
        if args.ids:
            seqs += json.load(open(args.ids))
        for spec in args.sets or ["+".join(sorted(rnd))]:
            spec = MODES.get(spec, spec)
            split = spec.endswith("+fsplit")
            chosen = set(POINTS) if spec.startswith("all") else set(spec.split("+")) - {"fsplit", "none"}
            print(json.dumps(evaluate_gguf(w, ref, seqs, chosen, split)), flush=True)
        return 0
    for name in args.model:
        if args.ablate:
            for p in sorted(rnd):
                print(json.dumps({"without": p, **evaluate(name, rnd - {p})}), flush=True)
        else:
            print(json.dumps(evaluate(name, rnd, args.fsplit)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
