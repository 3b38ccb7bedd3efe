#!/usr/bin/env python3
"""Writes model/testdata/smollm2_gguf_reference.json: for a few tensors of the
default model (SmolLM2-135M-Instruct.Q4_1.gguf), values dequantized by the
`gguf` package (gguf-py, llama.cpp's own numpy implementation), in Hugging
Face names and layout: dimensions reversed, and attn_q / attn_k rows
un-permuted from llama.cpp's interleaved RoPE order as transformers'
GGUF loader does (reshape(n_head, dim/2, 2, in).swapaxes(1, 2)).

Usage: python3 make_gguf_reference.py [GGUF_PATH]     Needs: pip install gguf numpy
"""
import json
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/banyan/SmolLM2-135M-Instruct.Q4_1.gguf")


def reverse_permute(w, n_head):
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def main():
    r = gguf.GGUFReader(PATH)
    heads = int(r.fields["llama.attention.head_count"].contents())
    kv_heads = int(r.fields["llama.attention.head_count_kv"].contents())
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "blk.0.attn_q.weight": "model.layers.0.self_attn.q_proj.weight",
        "blk.0.attn_k.weight": "model.layers.0.self_attn.k_proj.weight",
        "blk.0.attn_v.weight": "model.layers.0.self_attn.v_proj.weight",
        "blk.7.ffn_down.weight": "model.layers.7.mlp.down_proj.weight",
        "blk.29.attn_q.weight": "model.layers.29.self_attn.q_proj.weight",
        "blk.29.attn_norm.weight": "model.layers.29.input_layernorm.weight",
        "output_norm.weight": "model.norm.weight",
    }
    rng = np.random.default_rng(7)
    out = {"source": os.path.basename(PATH), "tensors": {}}
    for t in r.tensors:
        if t.name not in names:
            continue
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        w = w.reshape([int(d) for d in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            w = reverse_permute(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = reverse_permute(w, kv_heads)
        flat = w.reshape(-1)
        idx = rng.choice(flat.size, size=min(64, flat.size), replace=False)
        out["tensors"][names[t.name]] = {
            "type": t.tensor_type.name,
            "shape": list(w.shape),
            "sum": float(flat.sum()),
            "sum_sq": float((flat * flat).sum()),
            "index": [int(i) for i in idx],
            "value": [float(flat[i]) for i in idx],
        }
    with open(os.path.join(HERE, "smollm2_gguf_reference.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", len(out["tensors"]), "tensors")


if __name__ == "__main__":
    main()
