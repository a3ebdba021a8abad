// Parameters of the decode kernels (decode.cuh, decode_mma.cuh), included by
// both the host (planner, launcher) and the generated device code, so their
// layout cannot drift. Each kernel takes exactly one params struct by value as
// a __grid_constant__ argument. The KV cache and the variant's scalars come
// in the structs every family shares.
#pragma once
#include "kv_source_params.h"
#include "platform.cuh"
#include "variant_params.h"

namespace attnjit {
namespace kernels {

// One CTA row's share of a batch (decode_work.cuh): KV rows [begin, end) of
// `request`, counted from the first row inside its window, and where the
// result goes. 16 bytes, read with one vector load.
struct alignas(16) DecodeWorkItem {
  int32_t request;  // < 0: padding of a fixed grid (CUDA graphs); the CTA exits at once
  int32_t begin;
  int32_t end;      // clamped to the request's length on the device
  int32_t slot;     // < 0: the request's only chunk, written to o/lse; else its partial slot
};

struct DecodeParams {
  const void* q;        // query token (row) t, head h at q + t * q_stride_b + h * q_stride_h (or q_row_offsets)
  void* o;              // likewise with o_stride_b / o_stride_h (or o_row_offsets)
  float* lse;           // [tokens, num_qo_heads], base 2; may be null
  // [slots, q_len, num_qo_heads, head_dim]: slot s, token t of its request,
  // head h at row (s * q_len + t) * num_qo_heads + h (decode_queries.cuh)
  float* partial_o;
  float* partial_lse;   // [slots, q_len, num_qo_heads]
  const DecodeWorkItem* work;  // one item per blockIdx.z; null: the uniform partition below
                               // (blockIdx.z = split * num_requests + request; decode_work.cuh)
  int64_t q_stride_b, q_stride_h;
  int64_t o_stride_b, o_stride_h;
  KVSourceParams kv;    // the kernel reads the sequence length from here (kv_source.cuh)
  VariantParams var;
  int32_t kv_len;       // as planned (single decode: equals kv.kv_len); kernels read the length, and
                        // so the query position length - 1 and the window's first row, through the KV source
  // The uniform partition (no work list): every request cut into num_splits
  // chunks of chunk_size rows, split s covering [first + s*chunk, ...).
  int32_t chunk_size;
  int32_t num_splits;
  int32_t num_requests;  // single decode: 1
  int32_t num_qo_heads;
  int32_t group_size;   // num_qo_heads / num_kv_heads
  // Query tokens per request (decode_queries.cuh). Decode has one; speculative
  // decoding several, the last q_len positions of the request's sequence,
  // causal among themselves. Without q_indptr every request has q_len and
  // request b's are rows b * q_len .. of q / o / lse; with it (TensorRT-LLM's
  // cum_seq_lens_q, [num_requests + 1]) request b's are rows q_indptr[b] ..
  // q_indptr[b+1] and q_len is the most any request has. The partial states
  // hold q_len tokens per slot either way. 0 (a zero-filled struct) means 1.
  int32_t q_len;
  const int32_t* q_indptr;
  // With q_indptr: q's token rows. The kernels check each request's pair of
  // entries against it and q_len (decode_queries.cuh) and void a request
  // whose rows fall outside (kernels/table_check.h).
  int64_t q_rows;
  // cuDNN's ragged batch_offsets_q / batch_offsets_o: null, or where token
  // row t of q (o) starts, in elements, replacing t * q_stride_b (o_stride_b);
  // heads keep their stride from there. Device data: the host cannot check
  // that a row stays inside its tensor.
  const int32_t* q_row_offsets;
  const int32_t* o_row_offsets;
  // With them: the largest offset a row may have (its heads and dims inside
  // the tensor) and the step offsets keep (16-byte rows). The kernels void
  // and record a request whose offset is outside (decode_queries.cuh).
  int64_t q_row_offset_max, o_row_offset_max;
  int32_t q_row_offset_step, o_row_offset_step;
  // TensorRT-LLM's bmm1_scale / bmm2_scale given as device float32 tensors:
  // null, or one float each that multiplies var.sm_scale / var.v_scale (the
  // host then leaves only the factors it folds in itself there, 1 for
  // TensorRT-LLM). Read by the kernel when it runs, once per CTA, so a CUDA
  // graph replays with whatever value the tensor holds by then
  // (decode_scales.cuh). A zero-filled struct (single decode): the floats alone.
  const float* sm_scale_factor;
  const float* v_scale_factor;
  // Split KV merged inside the decode kernel (decode_epilogue.cuh): null (a
  // merge kernel follows), or one counter per row group, [num_requests]
  // [num_kv_heads][gridDim.x], zero before the launch and left zero after it.
  // The last CTA of a group to finish merges the group's partial states.
  // merge_indptr: request b's partial slots are [merge_indptr[b],
  // merge_indptr[b+1]) (the work list's); null: the uniform partition's
  // num_splits slots, split s at s * num_requests + b.
  int32_t* merge_counters;
  const int32_t* merge_indptr;
  // How many of its chunk's first rows a CTA warms in L2 before pdl_wait(),
  // so the DRAM streams while the kernel before finishes (decode_prefetch.cuh):
  // 0 for none. The addresses are hints built from data the kernel before
  // may still write, bounded so they stay inside the cache (kv_source.cuh,
  // KVSource::Hint), and the rows must be 16-byte aligned (the host checks).
  // The planner sizes it (decode_choice.cpp). prefetch_items: the items
  // (blockIdx.z) that warm, those of the first wave: a later wave's CTAs
  // start when the wait has long returned.
  int32_t prefetch_rows;
  int32_t prefetch_items;
  // Speculative decoding's draft-tree mask (variant mask kMaskDraft; null
  // otherwise), TensorRT-LLM's `mask`: one row of draft_mask_row_words
  // 32-bit words per query token row (the rows of q), bit c of a row (word
  // c / 32, bit c % 32) set when that token sees its request's draft token
  // c; the keys before the draft tokens are seen by all (kernels/mask.cuh).
  // Last in the struct: the fields before keep their offsets.
  const uint32_t* draft_mask;
  int32_t draft_mask_row_words;
};

// Dynamic shared memory of the decode kernel: one (m, d, o[head_dim]) state
// per warp and query row (heads x tokens) for the cross-warp merge. Shared by
// host and device so the launch and the kernel agree.
ATTNJIT_HOST_DEVICE constexpr int decode_smem_bytes(int warps, int rows_per_cta, int head_dim) {
  return warps * rows_per_cta * (head_dim + 2) * 4;
}

// Dynamic shared memory of the tensor-core decode kernel: double-buffered K and
// V tiles of 16 rows per warp plus a 16-row Q tile, 16-bit, rows padded by 8
// elements; with split_qk (RoPE: the rotated q and k as a rounded part and
// the rest, decode_mma.cuh) a second Q tile and K tiles for the rest; reused
// afterwards for the cross-warp merge (fp32 states).
ATTNJIT_HOST_DEVICE constexpr int decode_mma_smem_bytes(int warps, int head_dim, bool split_qk = false) {
  return ((4 * 16 * warps + 16) + (split_qk ? 2 * 16 * warps + 16 : 0)) * (head_dim + 8) * 2 >
                 warps * 16 * (head_dim + 2) * 4
             ? ((4 * 16 * warps + 16) + (split_qk ? 2 * 16 * warps + 16 : 0)) * (head_dim + 8) * 2
             : warps * 16 * (head_dim + 2) * 4;
}

// Resident CTAs per SM of the tensor-core decode kernel: its
// __launch_bounds__ minimum and the planner's waves. Its registers and shared
// memory would let three CTAs share an SM, but three ran slower (grids quantize
// worse, each CTA streams slower), so the kernel promises two and the planner counts two.
constexpr int kDecodeMmaCtasPerSm = 2;

}  // namespace kernels
}  // namespace attnjit
