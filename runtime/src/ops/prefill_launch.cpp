#include "ops/prefill_launch.hpp"

#include <fmt/format.h>

#include <cstring>

#include "attnjit/error.hpp"
#include "cuda/driver.hpp"
#include "launcher.hpp"
#include "prefill_ws_params.h"
#include "spec/prefill_kernel.hpp"

namespace attnjit::ops {

namespace {

// The device needs a map 64-byte aligned; cuda.h may align CUtensorMap more. The bytes are copied.
static_assert(sizeof(CUtensorMap) == sizeof(kernels::TmaMap) && alignof(kernels::TmaMap) >= 64,
              "kernels::TmaMap holds a CUtensorMap's bytes");

// K or V as a [rows, kv heads, head_dim] tensor with the cache's strides (in
// elements), read in boxes of 64 dims x 1 head x tile_kv rows with the
// 128-byte swizzle the wgmma descriptors expect (swizzled_tile.cuh); fp8
// (e4m3, one byte an element, as bytes): boxes of 128 dims, still 128 bytes
// a row. Rows past the tensor read as zeros.
kernels::TmaMap encode_kv_map(const char* what, const void* data, DType dtype, int64_t rows, int64_t heads,
                              int head_dim, int64_t stride_row, int64_t stride_head, int tile_kv) {
  kernels::TmaMap out{};
  if (rows <= 0) return out;  // no tile reads it
  const bool fp8 = dtype == DType::E4M3;
  const int64_t elem = fp8 ? 1 : 2;
  const cuuint64_t dims[3] = {cuuint64_t(head_dim), cuuint64_t(heads), cuuint64_t(rows)};
  const cuuint64_t strides[2] = {cuuint64_t(stride_head * elem), cuuint64_t(stride_row * elem)};
  const cuuint32_t box[3] = {cuuint32_t(128 / elem), 1, cuuint32_t(tile_kv)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0 || strides[0] % 16 != 0 || strides[1] % 16 != 0)
    throw Error(Status::InvalidArgument,
                fmt::format("{}: the warp-specialized prefill reads it by TMA, which needs a 16-byte aligned start "
                            "and row and head strides of whole 16 bytes (got strides {} and {} elements)",
                            what, stride_row, stride_head));
  CUtensorMap map;
  const CUresult r = cuda::driver().TensorMapEncodeTiled(
      &map,
      fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
          : dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      3,
      const_cast<void*>(data), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(Status::Internal, fmt::format("cuTensorMapEncodeTiled for {} failed (CUresult {}): rows {}, heads {}, "
                                              "head_dim {}, strides {} / {} elements",
                                              what, static_cast<int>(r), rows, heads, head_dim, stride_row,
                                              stride_head));
  std::memcpy(&out, &map, sizeof(map));
  return out;
}

}  // namespace

void launch_prefill(const detail::Kernel& kernel, const LaunchShape& shape, const kernels::PrefillParams& p, Stream stream) {
  const PrefillKernel* spec = kernel.spec.as<PrefillKernel>();
  if (!spec || !spec->warp_specialized) {
    detail::launch(kernel, shape, &p, stream);
    return;
  }
  kernels::PrefillWsParams wp{};
  wp.p = p;
  const int pos = spec->variant.pos_encoding == PosEncoding::RopeLlama ? kernels::kPosRopeLlama : kernels::kPosNone;
  if (kernels::prefill_ws_tma(spec->kv_source != KVSource::Paged, pos)) {  // else the producer gathers
    // Contiguous: the sequence; ragged: every request's rows (kv_len holds the tensor's rows there).
    const int64_t rows = p.kv.kv_len, heads = p.num_qo_heads / int64_t(p.group.d);
    const DType dt = spec->variant.kv_dtype;
    wp.k_map = encode_kv_map("k", p.kv.k, dt, rows, heads, spec->head_dim, p.kv.k_stride_row, p.kv.k_stride_head,
                             spec->tile_kv());
    wp.v_map = encode_kv_map("v", p.kv.v, dt, rows, heads, spec->head_dim, p.kv.v_stride_row, p.kv.v_stride_head,
                             spec->tile_kv());
  }
  detail::launch(kernel, shape, &wp, stream);
}

}  // namespace attnjit::ops
