#!/usr/bin/env bash
# On the CPU machine: builds what a device step runs and packs it into .gpupack/gpu.tar.xz (the device
# tool carries at most 64 MB, and the unstripped test binary and library alone are larger): the build's
# attnjit, attnjit_tests and libattnjit.so, stripped, plus the Debian libraries they link that the GPU
# image lacks (fmt, spdlog, libarchive and its dependencies). tools/gpu/env.sh unpacks it into .gpu/.
#   bash tools/gpu/pack.sh [build-dir]     BUILD=0: pack what is built; BUILD_LOCK=<file>: build under flock
# A base build for an A/B goes beside it by hand, e.g. .gpupack/base/attnjit (bench.sh's CLIS / LIBS).
set -euo pipefail
B=${1:-build}
if [ "${BUILD:-1}" != 0 ]; then
  ${BUILD_LOCK:+flock "$BUILD_LOCK"} cmake --build "$B" -j"$(nproc)" --target attnjit attnjit_cli attnjit_tests
fi
rm -rf .gpu .gpupack/gpu.tar.xz && mkdir -p .gpu/lib .gpupack
cp -a "$B"/attnjit "$B"/attnjit_tests "$B"/libattnjit.so* .gpu/
strip --strip-unneeded .gpu/attnjit .gpu/attnjit_tests .gpu/libattnjit.so.*.*.* 2>/dev/null || true
for lib in libfmt.so.9 libspdlog.so.1.10 libarchive.so.13 libnettle.so.8 libacl.so.1 liblz4.so.1 libxml2.so.2 \
           libicuuc.so.72 libicudata.so.72; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" .gpu/lib/
done
tar -cJf .gpupack/gpu.tar.xz .gpu
du -h .gpupack/gpu.tar.xz
