#!/usr/bin/env bash
# Device-side glue for check_gguf_logits.py. The default model's GGUF (98 MB) is larger than one
# device call may carry (64 MiB), so it travels in two halves in two calls, each carrying one
# half in .gguf_part/ (with the gguf wheel). Each call stashes its half in /tmp/gguf_parts; the
# call that finds both halves (the machine is still warm from the other) joins them, checks the
# sha256 and runs the check. Prints what it did; writes results under $OUT/gguf_ref.
#   usage: bash tests/hf/run_gguf_check.sh SHA256
set -u
want=$1
stash=/tmp/gguf_parts
mkdir -p "$stash"
for d in .gguf_part .gguf_part_b; do [ -d $d ] && cp $d/*.part.* "$stash"/ 2>/dev/null; done
ls -la "$stash"
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$stash/$name.part.aa" ] || [ ! -f "$stash/$name.part.ab" ]; then
  echo "gguf: only one half here so far; call again with the other half while the machine is warm"
  exit 0
fi
cat "$stash/$name.part.aa" "$stash/$name.part.ab" > "/tmp/$name"
got=$(sha256sum "/tmp/$name" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "gguf: sha256 mismatch $got"; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_gguf $(ls .gguf_part*/gguf-*.whl | head -1) || exit 1
PYTHONPATH=/tmp/site_gguf:${PYTHONPATH:-} PYTHONUNBUFFERED=1 \
  python3 tests/hf/check_gguf_logits.py --gguf "/tmp/$name" --out "${OUT:-/tmp}/gguf_ref"
