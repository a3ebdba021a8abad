#!/usr/bin/env bash
# Builds attnjit and prewarms the kernel cache for a model (default llama-3.1-8b).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup/build.sh
./build/attnjit prewarm --model "${1:-llama-3.1-8b}" "${@:2}"
