#!/usr/bin/env bash
# README command 1: sets up, builds and runs Banyan's main job on this machine
# (the GPU when there is one, else the CPU with the embedded default model):
# `banyan demo` forks a prompt into sampled branches that share its KV, votes
# over their answers (self-consistency), forks a chat turn, and prints the KV
# tree, the answer and the throughput. Extra arguments go to `banyan demo`
# (e.g. --samples 16 --max-tokens 32 --device cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BIN="${BANYAN_BUILD_DIR:-build}/sdk/banyan"
"$BIN" info
echo
"$BIN" demo "$@"
