#!/usr/bin/env bash
# Configures and builds attnjit into build/ (Release).
#   build.sh            library, CLI and the Catch2 test binary
#   build.sh --no-tests library and CLI only (no Catch2 needed, much less to compile)
# Both share build/, so whichever runs second reuses the first one's objects.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--no-tests" ]; then
  bash tools/setup/deps.sh --no-tests
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTNJIT_BUILD_TESTS=OFF -DATTNJIT_PYTHON_PACKAGE=OFF >/dev/null
  cmake --build build -j"$(nproc)" --target attnjit attnjit_cli
else
  bash tools/setup/deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DATTNJIT_BUILD_TESTS=ON -DATTNJIT_PYTHON_PACKAGE=OFF >/dev/null
  cmake --build build -j"$(nproc)"
fi
