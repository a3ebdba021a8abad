#!/usr/bin/env bash
# Builds and runs every test: the Catch2 suite (CPU tests; [gpu] tests skip
# without a device) and, where Python has pytest, the Python binding's tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup/build.sh
# A private cache so tests never touch the user's.
export ATTNJIT_CACHE_DIR="$(mktemp -d)"
trap 'rm -rf "$ATTNJIT_CACHE_DIR"' EXIT
# Python binding (ctypes over the C API): its CPU tests run here; torch/GPU ones skip.
if python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q pytest >/dev/null 2>&1; then
  PYTHONPATH=tools/python ATTNJIT_LIBRARY="$PWD/build/libattnjit.so" python3 -m pytest -q tools/python/tests
fi
# Last, so its summary closes the log.
./build/attnjit_tests --order rand --rng-seed time
