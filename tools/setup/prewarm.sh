#!/usr/bin/env bash
# Builds the library and CLI (no tests), installs them into a prefix
# ($ATTNJIT_PREFIX, default ~/.local: bin/attnjit, lib/libattnjit.so,
# include/attnjit, CMake and pkg-config files), then prewarms the kernel
# cache for a model (default llama-3.1-8b) with the installed CLI.
#   bash tools/setup/prewarm.sh [MODEL] [prewarm options, e.g. --arch sm_90a -j 8]
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix=${ATTNJIT_PREFIX:-$HOME/.local}
bash tools/setup/build.sh --no-tests
cmake --install build --prefix "$prefix" >/dev/null
echo "installed attnjit into $prefix (CLI: $prefix/bin/attnjit)"
"$prefix/bin/attnjit" prewarm --model "${1:-llama-3.1-8b}" "${@:2}"
