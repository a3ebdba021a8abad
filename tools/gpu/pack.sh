#!/usr/bin/env bash
# On the CPU machine: packs what a device step runs into .gpupack/gpu.tar.xz
# (the device tool carries at most 64 MB, and the unstripped test binary and
# library alone are larger): build/'s attnjit, attnjit_tests and
# libattnjit.so, stripped, plus the Debian libraries they link that the GPU
# image lacks (fmt, spdlog, libarchive and its dependencies). The device
# scripts extract it with `python3 -m tarfile -e .gpupack/gpu.tar.xz .`.
#   bash tools/gpu/pack.sh [build-dir]
set -euo pipefail
B=${1:-build}
rm -rf .gpu .gpupack && mkdir -p .gpu/lib .gpupack
cp -a "$B"/attnjit "$B"/attnjit_tests "$B"/libattnjit.so* .gpu/
strip --strip-unneeded .gpu/attnjit .gpu/attnjit_tests .gpu/libattnjit.so.*.*.* 2>/dev/null || true
for lib in libfmt.so.9 libspdlog.so.1.10 libarchive.so.13 libnettle.so.8 libacl.so.1 liblz4.so.1 libxml2.so.2 \
           libicuuc.so.72 libicudata.so.72; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" .gpu/lib/
done
tar -cJf .gpupack/gpu.tar.xz .gpu
du -h .gpupack/gpu.tar.xz
