#!/usr/bin/env python3
"""Writes model/testdata/chat_golden.json: prompts rendered by transformers'
apply_chat_template (jinja2) for the chat templates in
shared/assets/chat_templates, the default model's own template (read from its
GGUF metadata tokenizer.chat_template), and Mistral-7B-Instruct-v0.1's
template and Meta-Llama-3-8B-Instruct's, over several conversations, with add_generation_prompt false and
true. A conversation the template refuses (raise_exception) is stored as null.

Usage: python3 make_chat_golden.py [ASSETS_DIR] [GGUF_PATH]
Needs: pip install transformers tokenizers jinja2 gguf
"""
import gzip
import json
import os
import sys

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/assets")
GGUF = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser(
    "~/.cache/banyan/SmolLM2-135M-Instruct.Q4_1.gguf")

# mistralai/Mistral-7B-Instruct-v0.1 tokenizer_config.json chat_template.
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
           "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
           "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
           "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
           "{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and "
           "assistant roles are supported!') }}{% endif %}{% endfor %}")

# meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template.
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
          "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
          "<|end_header_id|>\n\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Arr!"}, {"role": "user", "content": "Where is the treasure?"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "and 3+3?"}],
    [{"role": "system", "content": "  padded system  \n"},
     {"role": "user", "content": "\n  spaced question  \n"},
     {"role": "assistant", "content": "\n\nanswer with leading newlines  "}],
    [{"role": "user", "content": "Grüße 👋 <|im_end|> text\twith tab"}],
    [{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": "Why?"},
     {"role": "assistant", "content": "Because."}],
    [{"role": "system", "content": "/think"}, {"role": "user", "content": "Think hard."}],
    [{"role": "user", "content": "first"}, {"role": "system", "content": "late system"},
     {"role": "user", "content": "second"}],
    [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
]


def load_tokenizer(name):
    with gzip.open(os.path.join(ASSETS, "tokenizers", name, "tokenizer.json.gz"), "rt") as f:
        return Tokenizer.from_str(f.read())


def main():
    llama = load_tokenizer("llama3")
    qwen = load_tokenizer("qwen2.5")
    templates = {}
    tdir = os.path.join(ASSETS, "chat_templates")
    for fname in sorted(os.listdir(tdir)):
        with open(os.path.join(tdir, fname)) as f:
            text = f.read()
        is_llama = "start_header_id" in text
        templates[fname] = {
            "source": "asset", "path": "chat_templates/" + fname, "template": text,
            "bos": "<|begin_of_text|>" if is_llama else "<|endoftext|>",
            "eos": "<|eot_id|>" if is_llama else "<|im_end|>",
            "backend": llama if is_llama else qwen,
        }
    templates["mistral-v0.1"] = {"source": "inline", "template": MISTRAL, "bos": "<s>",
                                 "eos": "</s>", "backend": llama}
    templates["llama-3"] = {"source": "inline", "template": LLAMA3, "bos": "<|begin_of_text|>",
                            "eos": "<|eot_id|>", "backend": llama}
    if os.path.exists(GGUF):
        import gguf
        r = gguf.GGUFReader(GGUF)
        tokens = r.fields["tokenizer.ggml.tokens"].contents()
        templates["default-model"] = {
            "source": "default-model", "template": r.fields["tokenizer.chat_template"].contents(),
            "bos": tokens[int(r.fields["tokenizer.ggml.bos_token_id"].contents())],
            "eos": tokens[int(r.fields["tokenizer.ggml.eos_token_id"].contents())],
            "backend": qwen,
        }
    out = {"conversations": CONVERSATIONS, "templates": {}}
    for name, t in templates.items():
        tok = PreTrainedTokenizerFast(tokenizer_object=t["backend"], bos_token=t["bos"],
                                      eos_token=t["eos"])
        tok.chat_template = t["template"]
        rendered = []
        for conv in CONVERSATIONS:
            pair = []
            for gen in (False, True):
                try:
                    pair.append(tok.apply_chat_template(conv, tokenize=False,
                                                        add_generation_prompt=gen))
                except Exception:  # the template refused this conversation
                    pair.append(None)
            rendered.append(pair)
        entry = {k: v for k, v in t.items() if k != "backend"}
        entry["expected"] = rendered
        out["templates"][name] = entry
    with open(os.path.join(HERE, "chat_golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print("wrote", len(out["templates"]), "templates x", len(CONVERSATIONS), "conversations")


if __name__ == "__main__":
    main()
