#!/usr/bin/env python3
"""Builds tiny, seeded, randomly initialized Llama / Qwen2 checkpoints with reference logits.

Each model is saved with transformers' save_pretrained (safetensors, no tokenizer) and next to
it the logits transformers computes for it in fp32 on the CPU, so the C++ runtime can be checked
against an implementation nobody here wrote, in CI, without torch.

Per model folder (NAME/):
  config.json, generation_config.json, model.safetensors (or shards + model.safetensors.index.json)
  reference.json   index: the model's shape facts, the token sequences, file names and layouts
  logits.bin       float32 little-endian [num_seqs][seq_len][vocab] for reference.json "seqs"
  long_top1.bin    int32 [num_long][long_len] argmax ids, then float32 [num_long][long_len][2]
                   (the largest and second-largest logit) for reference.json "long_seqs";
                   the margin lets a test skip near-ties when it counts top-1 agreement.

Weights are drawn from a seeded generator (every tensor, norms and biases included, is random and
non-trivial), rounded to the dtype the model is saved in, and the reference is computed from the
model reloaded from disk, so the logits belong to exactly the bytes that were saved.

Usage: python3 make_tiny_models.py --out DIR [--tar FILE.tar.gz]
Runs anywhere torch + transformers are installed (the GPU machine has both); the CPU does all
the work.
"""
import argparse
import json
import os
import shutil
import sys
import tarfile

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

VOCAB = 512
NUM_SEQS, SEQ_LEN = 3, 40
NUM_LONG, LONG_LEN = 8, 128

# name -> (architecture, config kwargs, saved dtype, max shard size or None)
MODELS = {
    # GQA 4:1, untied, head_dim 64 (wider than hidden/heads), saved as bf16.
    "llama_gqa4_untied": ("llama", dict(
        hidden_size=128, intermediate_size=128, num_attention_heads=4, num_key_value_heads=1,
        head_dim=64, tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), torch.bfloat16, None),
    # Odd number of heads (3 q / 1 kv), tied embeddings, saved as bf16.
    "llama_odd_heads_tied": ("llama", dict(
        hidden_size=96, intermediate_size=192, num_attention_heads=3, num_key_value_heads=1,
        head_dim=64, tie_word_embeddings=True, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), torch.bfloat16, None),
    # llama3 RoPE scaling with a small original context so all three frequency bands occur
    # within the sequences; MHA (2/2 heads); saved as fp32 to exercise F32 safetensors.
    "llama3_rope_mha_f32": ("llama", dict(
        hidden_size=48, intermediate_size=96, num_attention_heads=2, num_key_value_heads=2,
        head_dim=64, tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64}), torch.float32, None),
    # Qwen2 (QKV bias), GQA 2:1, tied, head_dim 64 = hidden/heads, saved as bf16.
    "qwen2_bias_tied": ("qwen2", dict(
        hidden_size=128, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
        tie_word_embeddings=True, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), torch.bfloat16, None),
    # Qwen2, GQA 4:1, untied, head_dim 16 (CPU-only for kernels limited to 64/128), saved as
    # bf16 in several shards with model.safetensors.index.json.
    "qwen2_gqa4_sharded": ("qwen2", dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=1,
        tie_word_embeddings=False, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), torch.bfloat16, "150KB"),
}


def randomize(model, seed):
    """Every parameter random: matrices N(0, 0.08), norms 1 + N(0, 0.1), biases N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=g))


@torch.no_grad()
def logits_of(model, ids):
    return model(input_ids=torch.tensor(ids, dtype=torch.long)).logits


def build(name, arch, kwargs, dtype, shard, out_dir, seed):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=512,
                  bos_token_id=1, eos_token_id=2, initializer_range=0.02)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, **kwargs))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common, **kwargs))
    randomize(model, seed)
    model = model.to(dtype)
    path = os.path.join(out_dir, name)
    save_kwargs = {"safe_serialization": True}
    if shard:
        save_kwargs["max_shard_size"] = shard
    model.save_pretrained(path, **save_kwargs)

    # Reference from the reloaded checkpoint, upcast exactly to fp32 (and fp64 for a sanity bound).
    ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    ref.eval()
    cfg = ref.config
    attn = ref.model.layers[0].self_attn
    head_dim = attn.q_proj.out_features // cfg.num_attention_heads
    rng = np.random.default_rng(seed + 1000)
    seqs = rng.integers(0, VOCAB, size=(NUM_SEQS, SEQ_LEN)).tolist()
    long_seqs = rng.integers(0, VOCAB, size=(NUM_LONG, LONG_LEN)).tolist()
    lg = logits_of(ref, seqs)
    lg64 = logits_of(ref.to(torch.float64), seqs)
    ref = ref.to(torch.float32)
    fp32_vs_fp64 = float((lg.double() - lg64).norm() / lg64.norm())
    lg.numpy().astype("<f4").tofile(os.path.join(path, "logits.bin"))
    ll = logits_of(ref, long_seqs)
    top2 = ll.topk(2, dim=-1)
    with open(os.path.join(path, "long_top1.bin"), "wb") as f:
        f.write(top2.indices[..., 0].numpy().astype("<i4").tobytes())
        f.write(top2.values.numpy().astype("<f4").tobytes())
    margins = (top2.values[..., 0] - top2.values[..., 1]).flatten()

    rope = getattr(cfg, "rope_parameters", None) or {}
    index = {
        "name": name,
        "architecture": type(ref).__name__,
        "saved_dtype": str(dtype).replace("torch.", ""),
        "sharded": bool(shard),
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_layers": cfg.num_hidden_layers,
        "num_q_heads": cfg.num_attention_heads,
        "num_kv_heads": cfg.num_key_value_heads,
        "head_dim": head_dim,
        "tie_word_embeddings": bool(cfg.tie_word_embeddings),
        "qkv_bias": attn.q_proj.bias is not None,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_parameters": dict(rope),
        "seed": seed,
        "seqs": seqs,
        "logits_file": "logits.bin",
        "logits_layout": "float32 LE [num_seqs][seq_len][vocab]",
        "logits_shape": list(lg.shape),
        "long_seqs": long_seqs,
        "long_file": "long_top1.bin",
        "long_layout": "int32 LE argmax [n][len], then float32 LE [n][len][2] (top1, top2 logit)",
        "long_shape": [NUM_LONG, LONG_LEN],
        "long_margin_min": float(margins.min()),
        "long_margin_median": float(margins.median()),
        "logits_abs_max": float(lg.abs().max()),
        "fp32_vs_fp64_rel_l2": fp32_vs_fp64,
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "device": "cpu", "attn_implementation": "eager"},
    }
    with open(os.path.join(path, "reference.json"), "w") as f:
        json.dump(index, f, indent=1)
    size = sum(os.path.getsize(os.path.join(path, x)) for x in os.listdir(path))
    print(json.dumps({"model": name, "bytes": size, "head_dim": head_dim,
                      "q/kv": f"{cfg.num_attention_heads}/{cfg.num_key_value_heads}",
                      "files": sorted(os.listdir(path)), "fp32_vs_fp64": fp32_vs_fp64,
                      "margin_min": index["long_margin_min"]}), flush=True)
    return size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder to write (its tiny_models/ is replaced)")
    ap.add_argument("--tar", help="also pack the folder into this .tar.gz")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    root = os.path.join(args.out, "tiny_models")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    total = 0
    for i, (name, (arch, kw, dtype, shard)) in enumerate(MODELS.items()):
        total += build(name, arch, kw, dtype, shard, root, seed=1234 + i)
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write("Generated by tests/hf/make_tiny_models.py (transformers %s, torch %s). "
                "Do not edit by hand; see that script for the file layouts.\n"
                % (transformers.__version__, torch.__version__))
    print(json.dumps({"total_bytes": total}), flush=True)
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as t:
            t.add(root, arcname="tiny_models")
        print(json.dumps({"tar": args.tar, "bytes": os.path.getsize(args.tar)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
