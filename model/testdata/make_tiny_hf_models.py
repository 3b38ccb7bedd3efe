#!/usr/bin/env python3
"""Tiny randomly initialized HF models + transformers' fp32 logits, the reference
the CPU backend (and the CUDA one) is checked against (model/cpu/hf_reference_test.cc).

Needs torch + transformers, so it runs ON THE GPU MACHINE (torch is not installed
on the build machine). From the repository root:

    python3 model/testdata/make_tiny_hf_models.py --out "$OUT/hf_tiny"

then copy the folder back to model/testdata/hf_tiny/ (the test reads it there).
Everything runs on the CPU in fp32 with the eager attention, so the logits are
transformers' own fp32 forward. Deterministic (fixed seeds).

Per configuration NAME it writes NAME/ with save_pretrained's config.json and
model.safetensors (fp32), plus
    tokens.txt   one sequence per line, space-separated token ids
    logits.f32   little-endian float32 [num_sequences][seq_len][vocab]
    meta.json    what was generated, with the transformers/torch versions
The config.json also carries the transformers-4 keys (rope_theta, rope_scaling)
next to transformers-5's rope_parameters, as checkpoints in the wild do; the
logits are computed from the model reloaded from the folder, so both agree.
"""
import argparse
import inspect
import json
import os

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

VOCAB = 512
SEQ_LEN = 24
NUM_SEQ = 3

# name: (model class, config class, kwargs, rope dict or None (default rope))
CONFIGS = {
    # Llama, GQA 4:1, untied, plain RoPE.
    "llama_gqa4": (LlamaForCausalLM, LlamaConfig,
                   dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=64, tie_word_embeddings=False,
                        rms_norm_eps=1e-5),
                   dict(rope_type="default", rope_theta=10000.0)),
    # Llama 3 style: odd number of heads (3, MHA), tied, llama3 RoPE scaling with a small
    # original context so all three frequency bands occur at head_dim 64.
    "llama3_odd_tied": (LlamaForCausalLM, LlamaConfig,
                        dict(hidden_size=96, intermediate_size=96, num_attention_heads=3,
                             num_key_value_heads=3, head_dim=64, tie_word_embeddings=True,
                             rms_norm_eps=1e-5),
                        dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                             low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=64)),
    # Qwen2: QKV bias, GQA 3:1 (6 q / 2 kv heads), tied.
    "qwen2_gqa3_tied": (Qwen2ForCausalLM, Qwen2Config,
                        dict(hidden_size=96, intermediate_size=128, num_attention_heads=6,
                             num_key_value_heads=2, head_dim=64, tie_word_embeddings=True,
                             rms_norm_eps=1e-6),
                        dict(rope_type="default", rope_theta=1000000.0)),
    # Qwen2, GQA 4:1, untied, linear RoPE scaling.
    "qwen2_gqa4_linear": (Qwen2ForCausalLM, Qwen2Config,
                          dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                               num_key_value_heads=1, head_dim=64, tie_word_embeddings=False,
                               rms_norm_eps=1e-6),
                          dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
}


def make_config(config_cls, kwargs, rope):
    common = dict(vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=256,
                  bos_token_id=1, eos_token_id=2, attn_implementation="eager", **kwargs)
    params = inspect.signature(config_cls.__init__).parameters
    if "rope_parameters" in params:  # transformers 5
        return config_cls(rope_parameters=dict(rope), **common)
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    return config_cls(rope_theta=rope["rope_theta"],
                      rope_scaling=None if scaling["rope_type"] == "default" else scaling, **common)


def add_v4_keys(path, rope):
    with open(path) as f:
        cfg = json.load(f)
    cfg["rope_theta"] = rope["rope_theta"]
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    cfg["rope_scaling"] = None if scaling["rope_type"] == "default" else scaling
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    for index, (name, (model_cls, config_cls, kwargs, rope)) in enumerate(CONFIGS.items()):
        torch.manual_seed(1234 + index)
        config = make_config(config_cls, kwargs, rope)
        config.initializer_range = 0.2  # larger than the default 0.02 so logits are O(1)
        model = model_cls(config).to(torch.float32).eval()
        # Non-trivial norm weights and biases (the default init makes them 1 and 0).
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("norm.weight"):
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                elif pname.endswith(".bias"):
                    p.copy_(0.1 * torch.randn_like(p))
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        add_v4_keys(os.path.join(folder, "config.json"), rope)
        reloaded = model_cls.from_pretrained(folder, torch_dtype=torch.float32,
                                             attn_implementation="eager").eval()
        gen = torch.Generator().manual_seed(99 + index)
        tokens = torch.randint(0, VOCAB, (NUM_SEQ, SEQ_LEN), generator=gen)
        with torch.no_grad():
            logits = reloaded(input_ids=tokens).logits.to(torch.float32)
            first = model(input_ids=tokens).logits.to(torch.float32)
        assert torch.allclose(logits, first, rtol=0, atol=1e-6), f"{name}: reload changed logits"
        np.asarray(logits.numpy(), dtype="<f4").tofile(os.path.join(folder, "logits.f32"))
        with open(os.path.join(folder, "tokens.txt"), "w") as f:
            for row in tokens.tolist():
                f.write(" ".join(str(t) for t in row) + "\n")
        with open(os.path.join(folder, "meta.json"), "w") as f:
            json.dump(dict(name=name, model=model_cls.__name__, num_sequences=NUM_SEQ, seq_len=SEQ_LEN,
                           vocab=VOCAB, transformers=transformers.__version__, torch=torch.__version__,
                           max_abs_logit=float(logits.abs().max())), f, indent=2)
        print(name, "max |logit|", float(logits.abs().max()), "params",
              sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
