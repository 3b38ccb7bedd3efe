#!/usr/bin/env bash
# README command 1: sets up, builds and runs Banyan's main job on this machine
# (the GPU when there is one, else the CPU with the embedded default model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BIN="${BANYAN_BUILD_DIR:-build}/sdk/banyan"
"$BIN" info
