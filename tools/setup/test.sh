#!/usr/bin/env bash
# Builds and runs every test a machine without a GPU can run ([gpu] tests
# skip, saying why):
#   1. the install: `cmake --install` into a temporary prefix, checked, and the
#      example consumer (examples/cpp) built against it through CMake and
#      through pkg-config, then run (it prewarms; with a GPU it also decodes);
#   2. the Python package: a wheel built with `pip wheel .` (scikit-build-core),
#      installed into a venv (build/venv) with pytest, and the Python tests run
#      against that install, not the checkout;
#   3. the Catch2 suite, last, so its summary closes the log.
# Installs: Debian packages through tools/setup/deps.sh (apt-get, only those
# missing); into the venv only, from PyPI: pytest, and the wheel's build
# backend scikit-build-core (in pip's isolated build environment).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
bash tools/setup/build.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A private cache so tests never touch the user's.
export ATTNJIT_CACHE_DIR="$tmp/cache"

echo "== install tree and example consumer"
cmake --install build --prefix "$tmp/prefix" >/dev/null
bash tools/setup/check_install.sh "$tmp/prefix"
# The cheapest kernels there are (head_dim 64, fp16, sm_80): the first run
# compiles them, the second finds them in the cache.
example_args=(--arch sm_80 --qo-heads 8 --kv-heads 8 --head-dim 64 --dtype f16 --kv-len 512)
cmake -S examples/cpp -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/example" >/dev/null
"$tmp/example/decode_server" "${example_args[@]}"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" make -s -C examples/cpp OUT="$tmp/decode_server_pc"
"$tmp/decode_server_pc" "${example_args[@]}" | tee "$tmp/pc.log"
grep -q "for sm_80: disk" "$tmp/pc.log" || { echo "error: the second run did not find the prewarmed kernels" >&2; exit 1; }

echo "== Python package (wheel, installed into build/venv)"
venv=build/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip pytest
# The wheel builds in build/ itself, with build/'s generator, so the library
# and CLI objects just built are reused (a separate folder compiled them all a
# second time: ~15 minutes on CI's two cores). Its configure turns the test
# binary off in build/; build.sh turns it on again on the next run.
CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/python" -m pip wheel -q --no-deps \
  -w "$tmp/dist" -C build-dir=build .
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$tmp"/dist/attnjit-*.whl
(cd "$tmp" && ATTNJIT_TEST_INSTALLED=1 "$repo/$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$repo/tools/python/tests")

echo "== Catch2"
./build/attnjit_tests --order rand --rng-seed time
