#!/usr/bin/env bash
# README command 2: sets up, builds and runs every test under ctest. GPU tests skip
# themselves where no GPU is present. Ends with ctest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${BANYAN_BUILD_DIR:-build}"
ctest --output-on-failure -j "${BANYAN_JOBS:-$(nproc)}" --timeout 900 "$@"
