// The decode family's kernel choice, shared by single and batch decode (one
// kernel family): which skeleton, heads per CTA and tile a shape gets, and
// what that tile means for the partition (rows per iteration, resident CTAs
// per SM). Pure host code and data: no compiled kernel is consulted.
#pragma once
#include <memory>

#include "attnjit/types.hpp"
#include "attnjit/variant.hpp"
#include "spec/decode_kernel.hpp"

namespace attnjit::ops {

// What the choice depends on; every operator of the family fills one.
struct DecodeShape {
  int num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  DType q_dtype = DType::F16, kv_dtype = DType::F16, o_dtype = DType::F16;
  PosEncoding pos_encoding = PosEncoding::None;
  bool soft_cap = false;
  bool use_tensor_cores = false;
  // Query tokens per request (the most any has): > 1 is speculative decoding
  // (mask causal, or draft with draft_mask), on the tensor-core skeleton at
  // head_dim <= 128 whatever use_tensor_cores says, on CUDA cores above.
  int q_len = 1;
  bool draft_mask = false;  // TensorRT-LLM's draft-tree mask (q_len > 1 only)
  // The device's opt-in shared memory per block (DeviceFigures): a
  // one-token problem whose tensor-core kernel would need more (RoPE's
  // split q/k at d = 128 on sm_86/89) runs on CUDA cores instead.
  int smem_per_block = 227 * 1024;
  // A user variant's source (options.variant), compiled into the kernel.
  std::shared_ptr<const VariantSource> user;
};

DecodeKernel choose_decode_kernel(const DecodeShape& s, KVSourceKind source);

// The decode grid's x dimension for a group of `group` query heads and q_len
// tokens per request: head blocks times token tiles (kernels/decode_queries.cuh).
int decode_query_blocks(const DecodeKernel& k, int group, int q_len);

struct DecodeTile {
  int rows_per_iter;  // a chunk's rows are rounded up to this
  int ctas_per_sm;    // resident CTAs per SM (from the compiler's register counts)
};
DecodeTile decode_tile(const DecodeKernel& k);
// Rows a warp of the CUDA-core skeleton covers per step: 32 lanes over a
// row's 8-element slices (16-element at head_dim 512).
int decode_rows_per_warp_step(int head_dim);

// The alignment, in bytes, that K and V rows (base pointer and strides) need
// for the kernel's vector loads: 16 on tensor cores (16-byte loads for any
// type), 8 elements on CUDA cores. run() checks the tensors against it.
int decode_kv_align_bytes(const DecodeKernel& k);

// Rows each warming CTA warms in L2 before its PDL wait
// (kernels/decode_prefetch.cuh), for chunks of `chunk` rows and
// `warming_ctas` CTAs that warm (one per KV head and first-wave item): 0 for
// none.
int decode_warmed_rows(const DecodeKernel& k, int chunk, int warming_ctas);

// Below this many rows a split's fixed cost (q load, partial write, merge) dominates.
constexpr int kMinRowsPerSplit = 128;

}  // namespace attnjit::ops
