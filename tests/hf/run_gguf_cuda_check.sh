#!/usr/bin/env bash
# Device-side glue for the default model on the GPU: the CUDA backend against the CPU backend on
# the GGUF (default_model_cuda_test) and `banyan generate --device cuda` (plain and --json).
#
# The GGUF (98 MB) plus the checkout exceed one device call's 64 MiB carry, so it travels in
# parts over consecutive calls while the machine stays warm: each call carries one part in a
# folder named .gguf_part*/ (git-ignored) and this script stashes it in /tmp/gguf_parts. A
# bundle travels the same way, once, as BUNDLE_DIR/bundle.tar.xz (the binaries and lib/), and is
# unpacked to /tmp/banyan_bundle. The call that completes the set joins the parts, checks the
# sha256, and runs the checks. Logs go to $OUT.
#   usage: bash tests/hf/run_gguf_cuda_check.sh SHA256 NUM_PARTS [BUNDLE_DIR]
set -u
want=$1
parts=$2
bundle_src=${3:-}
name=SmolLM2-135M-Instruct.Q4_1.gguf
stash=/tmp/gguf_parts
bundle=/tmp/banyan_bundle
logs=${OUT:-/tmp/gguf_logs}
mkdir -p "$stash" "$logs"
for d in .gguf_part*; do [ -d "$d" ] && cp "$d"/$name.part.* "$stash"/ 2>/dev/null; done
if [ -n "$bundle_src" ] && [ -f "$bundle_src/bundle.tar.xz" ]; then
  rm -rf "$bundle" && mkdir -p "$bundle" && tar -xJf "$bundle_src/bundle.tar.xz" -C "$bundle" || exit 1
  echo "bundle unpacked: $(ls "$bundle/bin" | tr '\n' ' ')"
fi
have=$(ls "$stash" | grep -c "^$name.part." || true)
echo "gguf parts here: $have of $parts"
[ "$have" -lt "$parts" ] && { echo "call again with the next part while the machine is warm"; exit 0; }
mkdir -p /tmp/gguf
cat "$stash"/$name.part.* > "/tmp/gguf/$name"
got=$(sha256sum "/tmp/gguf/$name" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "gguf: sha256 mismatch $got"; exit 1; }
[ -x "$bundle/bin/default_model_cuda_test" ] || { echo "no bundle in $bundle"; exit 1; }
export BANYAN_MODEL_DIR=/tmp/gguf BANYAN_SOURCE_DIR=$PWD LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== default_model_cuda_test ($(date -u +%Y-%m-%dT%H:%MZ))"
"$bundle/bin/default_model_cuda_test" --gtest_color=no 2>&1 | tee "$logs/default_model_cuda_test.log" |
  grep -E "positions|transformers|OK \]|FAILED|Failure|Expected|Which is|actual"
prompt="Write a haiku about a lighthouse."
echo "== banyan generate --device cuda --n 4 --max-tokens 48 --temperature 0.7 --seed 7"
"$bundle/bin/banyan" generate --device cuda --prompt "$prompt" --n 4 --max-tokens 48 --temperature 0.7 \
  --seed 7 2>&1 | tee "$logs/generate_cuda.txt"
echo "== banyan generate --device cuda --json (greedy, 32 tokens)"
"$bundle/bin/banyan" generate --device cuda --json --prompt "What is 17 * 23? Answer briefly." \
  --max-tokens 32 --temperature 0 2>&1 | tee "$logs/generate_cuda.json"
echo "== banyan generate --device cpu --json (greedy, 32 tokens; same prompt, for comparison)"
"$bundle/bin/banyan" generate --device cpu --threads 8 --json --prompt "What is 17 * 23? Answer briefly." \
  --max-tokens 32 --temperature 0 2>&1 | tee "$logs/generate_cpu.json"
