/* fp8 tensors across attnjit's C API.
 *
 * DLPack 0.6 (the version attnjit builds against) has no fp8 type codes, and
 * older PyTorch's to_dlpack refuses fp8 tensors. Every attnjit function that
 * takes a DLTensor accepts fp8 elements spelled the DLPack >= 1.1 way:
 *
 *     dtype = { ATTNJIT_DLPACK_FLOAT8_E4M3FN or ATTNJIT_DLPACK_FLOAT8_E5M2, bits 8, lanes 1 }
 *
 * so no entry point needs an fp8 twin, and producers that already export fp8
 * natively (DLPack 1.1) just work. A caller whose producer can only export
 * raw bytes (an fp8 tensor viewed as uint8) re-labels the DLTensor with
 * attnjit_dltensor_view_as below and passes the result instead.
 */
#ifndef ATTNJIT_FP8_H_
#define ATTNJIT_FP8_H_

#include "attnjit/attnjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DLPack 1.1's DLDataTypeCode values (kDLFloat8_e4m3fn, kDLFloat8_e5m2). */
#define ATTNJIT_DLPACK_FLOAT8_E4M3FN 10
#define ATTNJIT_DLPACK_FLOAT8_E5M2 12

/* Writes to *out a copy of *src whose dtype is `dtype` (a name as
 * attnjit spells it: "float8_e4m3fn", "float8_e5m2", "float16", "bfloat16",
 * "float32", or a short alias such as "e4m3"). src must be an integer tensor
 * (kDLInt/kDLUInt) of the same element width, i.e. raw bytes, or already of
 * that dtype. Only the struct is copied: out->data, out->shape and
 * out->strides point where src's do, so src's owner must outlive every use of
 * *out. On failure *out is left untouched. */
ATTNJIT_API attnjit_status_t attnjit_dltensor_view_as(const DLTensor* src, const char* dtype,
                                                      DLTensor* out);

#ifdef __cplusplus
}
#endif
#endif /* ATTNJIT_FP8_H_ */
