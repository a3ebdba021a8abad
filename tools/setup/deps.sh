#!/usr/bin/env bash
# Installs the Debian packages attnjit builds with (when missing) and checks
# for the CUDA toolkit's headers and NVRTC, which come with the toolkit.
set -euo pipefail
pkgs=(cmake g++ make libfmt-dev libspdlog-dev nlohmann-json3-dev catch2 libdlpack-dev libcli11-dev libssl-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda.h" ] || [ ! -f "$cuda_home/include/nvrtc.h" ]; then
  echo "error: CUDA toolkit headers (cuda.h, nvrtc.h) not found under $cuda_home; set CUDA_HOME" >&2
  exit 1
fi
