# Sourced by the device steps that run packed binaries (verify.sh,
# prefill_graph.sh, prefill_ab.sh, prefill_speed.sh), on the GPU machine from
# the checkout's root: $OUT for logs, the binaries unpacked into .gpu/ (from
# tools/gpu/pack.sh's .gpupack/gpu.tar.xz), the library paths and kernel
# cache they use, and FlashInfer's wheels from .peers/ installed into
# /tmp/site (on PYTHONPATH with the attnjit module) with its JIT settings.
OUT=${OUT:-/tmp/attnjit-out}
mkdir -p "$OUT"
python3 -m tarfile -e .gpupack/gpu.tar.xz . 2>/dev/null
export LD_LIBRARY_PATH=$PWD/.gpu/lib ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-cache}
export ATTNJIT_LIBRARY=$PWD/.gpu/libattnjit.so PYTHONPATH=/tmp/site:$PWD/tools/python
export FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 FLASHINFER_WORKSPACE_BASE=/tmp/fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .peers/*.whl >/dev/null 2>&1
