#!/usr/bin/env python3
"""Writes a Llama 2 style tokenizer.json (BPE with byte_fallback) and what the Hugging Face
`tokenizers` library makes of it, for model/tokenizer's byte-fallback BPE:

  model/testdata/llama_spm_byte_fallback.json.gz
      tokenizer.json built from llama.cpp's llama-spm vocabulary (shared/assets/tokenizers/golden/
      ggml-vocab-llama-spm.gguf.gz: Llama 2's 32,000 pieces, scores and token types): BPE model
      with byte_fallback and fuse_unk, merges derived from the scored pieces (every split of a
      piece into two pieces, ordered by the piece's score, then by the halves' ids), <0xNN> byte
      tokens, <unk> <s> </s> as special added tokens, the legacy Llama 2 normalizer
      (Prepend "▁" + Replace " " -> "▁", no pre-tokenizer), the Llama 2 decoder, and a
      TemplateProcessing that adds <s>.
  model/testdata/tokenizer_byte_fallback_golden.json
      {"texts": [...], "ids": {flavor: [...]}, "decoded": {flavor: [...]}} for the corpus of
      tokenizer_hf_golden.json and three flavors of that file: "prepend" (as written),
      "metaspace_first" (no normalizer; Metaspace pre-tokenizer, prepend_scheme "first", split
      false: transformers' non-legacy Llama / Mistral files) and "metaspace_always" (the same with
      prepend_scheme "always"; the decoder stays Llama's). ids: encode(text, add_special_tokens=False);
      decoded: decode(ids).

Usage: python3 make_byte_fallback_golden.py [ASSETS_DIR]
Needs: pip install tokenizers gguf
"""
import copy
import gzip
import json
import os
import sys
import tempfile

import gguf
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/assets")
SPACE = "\u2581"


def read_vocab():
    src = os.path.join(ASSETS, "tokenizers/golden/ggml-vocab-llama-spm.gguf.gz")
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(gzip.open(src).read())
        f.flush()
        r = gguf.GGUFReader(f.name)
        fld = r.fields
        tokens = [bytes(fld["tokenizer.ggml.tokens"].parts[i]).decode("utf-8")
                  for i in fld["tokenizer.ggml.tokens"].data]
        scores = [float(fld["tokenizer.ggml.scores"].parts[i][0]) for i in fld["tokenizer.ggml.scores"].data]
        types = [int(fld["tokenizer.ggml.token_type"].parts[i][0])
                 for i in fld["tokenizer.ggml.token_type"].data]
    return tokens, scores, types


def build(tokens, scores, types):
    vocab = {t: i for i, t in enumerate(tokens)}
    normal = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    merges = []
    for piece, i in normal.items():
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in normal and right in normal:
                local.append((scores[i], normal[left], normal[right], left, right))
        merges += sorted(local, key=lambda m: (m[1], m[2]))
    merges.sort(key=lambda m: -m[0])  # stable: ties keep the pieces' order
    special = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i in range(len(tokens)) if types[i] in (2, 3)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [vocab["<s>"]],
                                                      "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": [[m[3], m[4]] for m in merges]},
    }


def metaspace(base, scheme):
    j = copy.deepcopy(base)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme,
                          "split": False}
    return j  # the decoder stays Llama's (Replace, ByteFallback, Fuse, Strip), as transformers writes it


def main():
    tokens, scores, types = read_vocab()
    base = build(tokens, scores, types)
    texts = json.load(open(os.path.join(HERE, "tokenizer_hf_golden.json")))["texts"]
    out = {"texts": texts, "ids": {}, "decoded": {}}
    for name, j in [("prepend", base), ("metaspace_first", metaspace(base, "first")),
                    ("metaspace_always", metaspace(base, "always"))]:
        tok = Tokenizer.from_str(json.dumps(j))
        ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        out["ids"][name] = ids
        out["decoded"][name] = [tok.decode(i, skip_special_tokens=False) for i in ids]
        print(name, sum(len(i) for i in ids), "tokens", file=sys.stderr)
    with gzip.GzipFile(os.path.join(HERE, "llama_spm_byte_fallback.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(base, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    with open(os.path.join(HERE, "tokenizer_byte_fallback_golden.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
    print(len(base["model"]["merges"]), "merges", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
