#!/usr/bin/env python3
"""HF transformers `generate` decode throughput on the ~1B Llama-shaped model of
bench/model_cuda_bench.cc, for a side-by-side comparison in one device run.

Model: LlamaForCausalLM with random init (bf16 on the GPU, SDPA attention), hidden 2048,
16 layers, 32 q / 8 KV heads (head_dim 64), intermediate 8192, vocab 32000, untied LM head,
rope_theta 10000. Batch B in {1, 64, 256}; each row is a copy of one random 512-token prompt
(HF keeps one KV cache per row); greedy decoding forced to exactly N new tokens.
Branches (--branches, default 256; 0 skips): the tree-search case, one random 2048-token prompt
(--branch-prompt) expanded by num_return_sequences into that many sampled branches (temperature
1, no top-k/top-p), N new tokens each; HF prefills every branch's copy of the prompt (no sharing).

Decode throughput excludes the prefill the same way model_cuda_bench does: the time of
generate(max_new_tokens=1 + N) minus that of generate(max_new_tokens=1) (prefill + first
token), so tok/s = B * N / difference. Each timing is the median of `--repeats` runs after a
warm-up, with torch.cuda.synchronize() around the call.

  python3 bench/peers/hf_generate.py [--batches 1,64,256] [--new-tokens 128] [--json out.json]
                                     [--branches 256] [--branch-prompt 2048]
Each result is printed as one JSON line; total_tok_per_s counts the prefill time too.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def build_model():
    config = LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=2048,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    return model


def timed_generate(model, ids, new_tokens, repeats, num_return_sequences=1):
    if num_return_sequences > 1:
        sampling = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                        num_return_sequences=num_return_sequences)
    else:
        sampling = dict(do_sample=False)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, use_cache=True, pad_token_id=0,
                                 **sampling)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
        assert out.shape[0] == ids.shape[0] * num_return_sequences, out.shape
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default="")
    parser.add_argument("--branches", type=int, default=256)
    parser.add_argument("--branch-prompt", type=int, default=2048)
    args = parser.parse_args()

    model = build_model()
    device = torch.cuda.get_device_name()
    print(f"device: {device}  torch {torch.__version__}  "
          f"transformers {__import__('transformers').__version__}  attn {model.config._attn_implementation}")
    results = []
    for batch in [int(b) for b in args.batches.split(",")]:
        gen = torch.Generator().manual_seed(batch)
        prompt = torch.randint(3, 32000, (1, args.prompt), generator=gen)
        ids = prompt.repeat(batch, 1).cuda()
        timed_generate(model, ids, 2, 1)  # warm-up
        t_first = timed_generate(model, ids, 1, args.repeats)
        t_all = timed_generate(model, ids, 1 + args.new_tokens, args.repeats)
        decode = t_all - t_first
        row = {"batch": batch, "prompt": args.prompt, "new_tokens": args.new_tokens,
               "prefill_plus_first_s": t_first, "generate_s": t_all,
               "decode_ms_per_step": 1e3 * decode / args.new_tokens,
               "decode_tok_per_s": batch * args.new_tokens / decode,
               "total_tok_per_s": batch * (1 + args.new_tokens) / t_all}
        results.append(row)
        print(json.dumps(row), flush=True)
        del ids
        torch.cuda.empty_cache()
    if args.branches > 0:
        gen = torch.Generator().manual_seed(4242)
        ids = torch.randint(3, 32000, (1, args.branch_prompt), generator=gen).cuda()
        n = args.branches
        row = {"branches": n, "prompt": args.branch_prompt, "new_tokens": args.new_tokens,
               "sampling": "temperature 1.0, num_return_sequences"}
        try:
            timed_generate(model, ids, 2, 1, n)  # warm-up
            t_first = timed_generate(model, ids, 1, args.repeats, n)
            t_all = timed_generate(model, ids, 1 + args.new_tokens, args.repeats, n)
            decode = t_all - t_first
            row.update({"batch": n, "prefill_plus_first_s": t_first, "generate_s": t_all,
                        "decode_ms_per_step": 1e3 * decode / args.new_tokens,
                        "decode_tok_per_s": n * args.new_tokens / decode,
                        "total_tok_per_s": n * (1 + args.new_tokens) / t_all,
                        "peak_mem_GiB": torch.cuda.max_memory_allocated() / 2**30})
            results.append(row)
        except torch.OutOfMemoryError as e:
            row["error"] = f"out of memory: {str(e)[:160]}"
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    print(f"\n{'batch':>6} {'ms/step':>10} {'tok/s':>12} {'total tok/s':>12}   (HF generate, {device})")
    for r in results:
        tag = f"{r['batch']}" + (f" branches/{r['prompt']}" if "branches" in r else f" x {r['prompt']}")
        print(f"{tag:>6} {r['decode_ms_per_step']:>10.2f} {r['decode_tok_per_s']:>12.1f}"
              f" {r['total_tok_per_s']:>12.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
