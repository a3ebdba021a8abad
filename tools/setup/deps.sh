#!/usr/bin/env bash
# Installs the Debian packages attnjit builds with (only those missing) and
# checks for the CUDA toolkit's headers and NVRTC, which come with the toolkit.
#   deps.sh               everything: library, CLI, tests, Python venv
#   deps.sh --no-tests    the library and CLI only (what prewarm.sh needs)
#   deps.sh ... PKG...    and these Debian packages too (fuzz.sh: clang)
set -euo pipefail
pkgs=(cmake g++ make pkg-config libfmt-dev libspdlog-dev nlohmann-json3-dev libdlpack-dev libcli11-dev libssl-dev
      libarchive-dev)
tests=1
if [ "${1:-}" = "--no-tests" ]; then
  tests=0
  shift
fi
pkgs+=("$@")
if ((tests)); then
  pkgs+=(catch2)
  # The test command makes a venv: Debian's python3 needs python3-venv for
  # that; another python3 (pyenv, conda) brings its own venv module.
  if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then pkgs+=(python3-venv); fi
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "apt-get install: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda.h" ] || [ ! -f "$cuda_home/include/nvrtc.h" ]; then
  echo "error: CUDA toolkit headers (cuda.h, nvrtc.h) not found under $cuda_home; set CUDA_HOME" >&2
  exit 1
fi
