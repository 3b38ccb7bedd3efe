#!/usr/bin/env python3
"""HF transformers `generate` on the engine benchmark's model shape, for bench/engine_bench.cc.

A randomly initialized LlamaForCausalLM (hidden 2048, 16 layers, 32/8 heads of 64,
intermediate 8192, vocab 32000) in bf16 on one GPU; a shared prompt of PREFIX random
tokens repeated for BRANCHES sequences (HF has no prefix sharing: each row holds and
reads its own copy of the prompt's KV), 128 new tokens each, greedy, EOS ignored.
Decode throughput = BRANCHES * 127 / (time of generate(128) - time of generate(1)),
i.e. prefill excluded, as the engine's decode_tok_s. Prints one JSON line per shape.

  python3 bench/hf_generate_baseline.py [--branches 256] [--prefix 2048]
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, use_cache=True,
                         pad_token_id=0, eos_token_id=None)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--branches", type=int, default=256)
    parser.add_argument("--prefix", type=int, default=2048)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=64, max_position_embeddings=32768, rope_theta=500000.0,
                         tie_word_embeddings=False)
    torch.manual_seed(1)
    model = LlamaForCausalLM(config).to(dtype=torch.bfloat16, device="cuda").eval()
    prompt = torch.randint(0, 32000, (1, args.prefix), device="cuda")
    ids = prompt.expand(args.branches, -1).contiguous()
    with torch.inference_mode():
        timed_generate(model, ids[:2, :64], 4)  # warm-up
        t1 = timed_generate(model, ids, 1)
        tn = timed_generate(model, ids, args.new_tokens)
    decode_tokens = args.branches * (args.new_tokens - 1)
    print(json.dumps({
        "impl": "hf_transformers_generate", "torch": torch.__version__,
        "branches": args.branches, "prefix": args.prefix, "new_tokens": args.new_tokens,
        "prefill_s": round(t1, 4), "total_s": round(tn, 4),
        "decode_tok_s": round(decode_tokens / (tn - t1), 1),
        "wall_tok_s": round(args.branches * args.new_tokens / tn, 1),
        "gpu": torch.cuda.get_device_name(0),
    }), flush=True)


if __name__ == "__main__":
    main()
