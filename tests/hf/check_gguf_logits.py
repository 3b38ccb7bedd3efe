#!/usr/bin/env python3
"""Reference logits of the default model's GGUF, computed by HF transformers loading that .gguf.

transformers dequantizes the GGUF (through the `gguf` package) into an fp32 LlamaForCausalLM and
builds its tokenizer and chat template from the GGUF metadata; nobody here wrote either. This
script runs it on fixed inputs and writes what our runtime must reproduce:

  reference.json  the GGUF name, size and sha256; vocab size; for every sequence its source
                  (a fixed text tokenized by transformers' GGUF tokenizer, or seeded random ids),
                  its token ids, and where its arrays are in data.bin; the chat template rendered
                  for a fixed conversation.
  data.bin        per sequence, little-endian: int32 top-K ids [len][K], float32 top-K logits
                  [len][K], float32 log-sum-exp of the logits [len]; and for sequences with
                  "full_last": float32 logits of the last position [vocab].

Usage (torch, transformers and gguf installed; the GPU is used when present, in fp32):
  python3 tests/hf/check_gguf_logits.py --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf --out DIR
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

TOPK = 8
TEXTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Tree search over reasoning paths: expand, score, select; repeat until the budget is spent.",
    "Numbers 1234567 and 3.14159, emoji \U0001F333\U0001F680, Grüße, 日本語, русский.",
]
CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 17 * 23? Answer briefly."}]
NUM_RANDOM, RANDOM_LEN = 4, 64


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    folder, name = os.path.split(os.path.abspath(args.gguf))
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").to(args.device)
    model.eval()
    vocab = model.config.vocab_size
    print(json.dumps({"loaded_s": round(time.time() - t0, 1), "arch": type(model).__name__,
                      "vocab": vocab, "layers": model.config.num_hidden_layers,
                      "tied": model.config.tie_word_embeddings}), flush=True)

    seqs = []
    for text in TEXTS:
        seqs.append({"source": "text", "text": text, "ids": tok(text).input_ids})
    chat_text = None
    if tok.chat_template:
        chat_text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
        seqs.append({"source": "chat", "text": chat_text, "ids": tok(chat_text, add_special_tokens=False).input_ids})
    rng = np.random.default_rng(2024)
    for _ in range(NUM_RANDOM):
        seqs.append({"source": "random", "ids": rng.integers(0, vocab, RANDOM_LEN).tolist()})
    seqs[0]["full_last"] = True
    seqs[-1]["full_last"] = True

    os.makedirs(args.out, exist_ok=True)
    blob = bytearray()

    def put(arr, dtype):
        off = len(blob)
        blob.extend(np.ascontiguousarray(arr, dtype=dtype).tobytes())
        return {"offset": off, "dtype": np.dtype(dtype).str, "shape": list(np.shape(arr))}

    positions = 0
    for s in seqs:
        ids = torch.tensor([s["ids"]], device=args.device)
        with torch.no_grad():
            lg = model(input_ids=ids).logits[0].float().cpu()
        top = lg.topk(TOPK, dim=-1)
        s["arrays"] = {"topk_ids": put(top.indices.numpy(), "<i4"),
                       "topk_logits": put(top.values.numpy(), "<f4"),
                       "lse": put(torch.logsumexp(lg, -1).numpy(), "<f4")}
        if s.get("full_last"):
            s["arrays"]["last_logits"] = put(lg[-1].numpy(), "<f4")
        s["len"] = len(s["ids"])
        positions += s["len"]
    with open(os.path.join(args.out, "data.bin"), "wb") as f:
        f.write(blob)
    index = {
        "gguf": name, "gguf_bytes": os.path.getsize(args.gguf), "gguf_sha256": sha256(args.gguf),
        "vocab_size": vocab, "topk": TOPK, "positions": positions,
        "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
        "add_bos_token": getattr(tok, "add_bos_token", None),
        "chat_messages": CHAT, "chat_rendered": chat_text,
        "seqs": seqs, "data_file": "data.bin",
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "gguf": __import__("gguf").__version__ if hasattr(__import__("gguf"), "__version__") else "?",
                      "device": args.device, "dtype": "float32", "attn_implementation": "eager",
                      "date_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())},
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
    for s in seqs:
        print(json.dumps({"source": s["source"], "len": s["len"], "ids_head": s["ids"][:12]}))
    print(json.dumps({"positions": positions, "data_bytes": len(blob), "total_s": round(time.time() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
