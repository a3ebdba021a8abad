#!/usr/bin/env bash
# Configures and builds attnjit into build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
