// The decode kernels' run-time scales (DecodeParams::sm_scale_factor /
// v_scale_factor, TensorRT-LLM's device-tensor bmm1_scale / bmm2_scale). The
// factor multiplies the float in VariantParams *before* the variant derives
// its own constants from it (AttentionVariant folds log2(e) into q_scale),
// so a scale from device memory goes through exactly the transform the host's
// float does, and a float and a tensor holding the same value give the same
// bits. Both are read after pdl_wait(): the previous kernel may write them.
#pragma once
#include "decode_params.h"
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {

// The variant's parameters with the device factor, if any, applied to sm_scale.
ATTNJIT_DEVICE kernels::VariantParams decode_variant_params(const kernels::DecodeParams& p) {
  kernels::VariantParams v = p.var;
  if (p.sm_scale_factor) v.sm_scale *= *p.sm_scale_factor;
  return v;
}

// The factor the decode epilogue multiplies each output by.
ATTNJIT_DEVICE float decode_v_scale(const kernels::DecodeParams& p) {
  return p.v_scale_factor ? p.var.v_scale * *p.v_scale_factor : p.var.v_scale;
}

}  // namespace attnjit
