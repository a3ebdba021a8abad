// Prewarm: compile (or find on disk) every kernel a problem needs, for an
// arch, with no GPU. A deployment runs this ahead of time, or a serving engine
// at start-up, so the first request never waits on NVRTC. Which kernels a
// problem needs does not depend on kv_len (one decode kernel and the merge
// kernel cover every length), so one call per model shape is enough.
#pragma once
#include <string>
#include <vector>

#include "attnjit/export.h"
#include "attnjit/runtime.hpp"
#include "attnjit/single_decode.hpp"

namespace attnjit {

struct PrewarmedKernel {
  std::string name;           // e.g. "decode_d128_g4_bf16_bf16_bf16_rope_w4_u4"
  std::string arch;           // what it was compiled for
  std::string origin;         // "memory", "disk" (already cached) or "compiled" (this call ran NVRTC)
  double compile_seconds = 0; // NVRTC time when origin is "compiled", else 0
};

// Validates the problem (Error(InvalidArgument/Unsupported) naming the field;
// `problem.device` is not used) and prepares its kernels for `arch` ("" = the
// Runtime's default_arch(): the first GPU's, else sm_90a). Kernels land in the
// Runtime's disk cache per its CacheConfig.
ATTNJIT_API std::vector<PrewarmedKernel> prewarm_single_decode(const Runtime& rt, const SingleDecodeProblem& problem,
                                                               const std::string& arch = {});

}  // namespace attnjit
