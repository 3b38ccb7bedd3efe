#!/usr/bin/env python3
"""Writes model/testdata/tokenizer_hf_golden.json: a varied text corpus and the
token ids the Hugging Face `tokenizers` library gives for it, for

  llama3      shared/assets/tokenizers/llama3/tokenizer.json.gz
  qwen2.5     shared/assets/tokenizers/qwen2.5/tokenizer.json.gz
  smollm2_gguf  the default model's GGUF vocabulary, converted by transformers'
              own GGUF tokenizer conversion (convert_gguf_tokenizer; the
              metadata is read with the `gguf` package because transformers'
              reader imports torch), once as transformers builds it and once
              with SmolLM2's published pre-tokenizer (Digits + ByteLevel).

Usage: python3 make_tokenizer_golden.py [ASSETS_DIR] [GGUF_PATH]
Needs: pip install tokenizers transformers gguf
"""
import gzip
import json
import os
import random
import sys

from tokenizers import Tokenizer, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/assets")
GGUF = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser(
    "~/.cache/banyan/SmolLM2-135M-Instruct.Q4_1.gguf")

FIXED = [
    "", " ", "  ", "\t", "\n", "\n\n\n", "\r\n", " \r\n \n", "   \t\t  \n  x", "a  b   c    d",
    "Hello world", " Hello world", "Hello, world! How's it going? I'M FINE, YOU'RE welcome.",
    "don't won't can't shouldn't y'all 'tis o'clock rock'n'roll", "it'S THE 'LL 'Ve 'RE 'D 'M",
    "def f(x):\n    return x * 2  # double\n\n\tif x > 0:\n\t\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot\n",
    "const re = /^[a-z]+$/gi; console.log(`${name}: ${value}`);",
    "<html><body class=\"main\"><p>Text &amp; more</p></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "1 12 123 1234 12345 123456 1234567 3.14159 -42 1e-5 0x1F 1,000,000 $99.99 50%",
    "٣٤٥ ١٢٣ １２３ ² ³ ½ Ⅻ ⑦ 𝟘𝟙𝟚",
    "Äpfel über Straße naïve café résumé Ångström", "e\u0301 A\u030a o\u0308 n\u0303 \u1100\u1161\u11a8",
    "Привет, мир! Как дела?", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "สวัสดีชาวโลก", "你好，世界！今天天气很好。", "こんにちは世界、カタカナとひらがな", "안녕하세요 세계",
    "កាន់តែពិសេសអាចខលចេញ", "ሰላም ዓለም", "Բարեւ աշխարհ", "გამარჯობა", "ᚠᛇᚻ᛫ᛒᛦᚦ",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 👨‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 🦙.cpp",
    "\u00a0non-breaking\u2003em space\u3000ideographic\u200bzero width\u2028line sep",
    "<|begin_of_text|>Hello<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "<|endoftext|><|im_start|><|im_end|>", "a<|im_start|>b", "<|im_start", "<|im_end|> <|im_end|>  x",
    "<s> </s> <unk> [INST] hi [/INST]", "<tool_call>{\"a\": 1}</tool_call>", "<think>\n\n</think>\n",
    "!!!??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "https://example.com/path?q=1&r=two#frag user@example.org", "C:\\Users\\name\\file.txt",
    "ſ 'ſ Kelvin K",
    " " * 40 + "x", "\n" * 12, "a" * 300, "ab" * 150 + " " + "1" * 50,
]

POOLS = [
    ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Tree", "search", "LLM"],
    ["Привет", "мир", "Straße", "naïve", "你好", "世界", "こんにちは", "안녕", "مرحبا", "नमस्ते", "ไทย"],
    ["0", "7", "42", "2024", "3.14", "1,000", "٣", "１２"],
    ["😀", "🚀", "👍🏽", "🇫🇷", "✅", "❤️", "👨‍💻"],
    [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0"],
    [".", ",", "!", "?", "'s", "'re", "'LL", "(", ")", "{", "}", "=>", "::", "//", "#", "\"", "`"],
    ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "<|endoftext|>"],
    ["def", "return", "if", "else", "for", "int", "std::vector", "->", "==", "+="],
]


def corpus():
    rng = random.Random(20261122)
    texts = list(FIXED)
    for _ in range(220):
        parts = []
        for _ in range(rng.randint(1, 14)):
            pool = POOLS[rng.randrange(len(POOLS))]
            parts.append(pool[rng.randrange(len(pool))])
            if rng.random() < 0.5:
                parts.append(" ")
        texts.append("".join(parts))
    return texts


def gguf_tokenizers(path):
    import gguf
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer

    reader = gguf.GGUFReader(path)

    def field(name):
        f = reader.fields.get(name)
        return None if f is None else f.contents()

    d = {
        "tokenizer_type": field("tokenizer.ggml.model"),
        "pre_tokenizer_type": field("tokenizer.ggml.pre"),
        "tokens": field("tokenizer.ggml.tokens"),
        "token_type": field("tokenizer.ggml.token_type"),
        "merges": field("tokenizer.ggml.merges"),
        "bos_token_id": field("tokenizer.ggml.bos_token_id"),
        "eos_token_id": field("tokenizer.ggml.eos_token_id"),
    }
    d = {k: v for k, v in d.items() if v is not None}
    as_built, _ = convert_gguf_tokenizer(field("general.architecture"), d)
    published = Tokenizer.from_str(as_built.to_str())
    published.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return as_built, published


def main():
    texts = corpus()
    tokenizers = {}
    for name in ["llama3", "qwen2.5"]:
        with gzip.open(os.path.join(ASSETS, "tokenizers", name, "tokenizer.json.gz"), "rt") as f:
            tokenizers[name] = Tokenizer.from_str(f.read())
    if os.path.exists(GGUF):
        built, published = gguf_tokenizers(GGUF)
        tokenizers["smollm2_gguf_transformers"] = built
        tokenizers["smollm2_gguf_published"] = published
    else:
        print("warning: no GGUF at", GGUF, "- skipping its cases", file=sys.stderr)
    out = {"texts": texts, "ids": {}, "decoded": {}}
    for name, tok in tokenizers.items():
        ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        out["ids"][name] = ids
        out["decoded"][name] = [tok.decode(i, skip_special_tokens=False) for i in ids]
    path = os.path.join(HERE, "tokenizer_hf_golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
    print("wrote", path, len(texts), "texts,", ", ".join(tokenizers))


if __name__ == "__main__":
    main()
