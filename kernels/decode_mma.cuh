// Decode attention on tensor cores, for grouped-query heads: the kHeads query
// heads sharing a KV head are the M dimension (padded to 16) of
// mma.m16n8k16, so q.k and p.v for 16 KV rows cost a few MMAs per warp
// instead of kHeads x (dot products + shuffles) per row.
//
// Grid (group_size / kHeads, work items, num_kv_heads), 4 warps (work items:
// decode_work.cuh). Each
// iteration the CTA stages a tile of 16 rows per warp: every thread loads its
// 8-element slices of K and V (the next tile's loads are in flight while this
// one computes), converts them (fp8 -> the q dtype, the variant's key
// transform) and stores them to shared memory; each warp then computes
// S = Q K^T on its 16 rows, the online softmax on the S fragments
// (fragment_softmax.cuh), and O += P V. Warps merge their states at the end,
// like the CUDA-core skeleton. K and V are found through the KV source
// (kv_source.cuh): single decode reads request 0 of a contiguous source, batch
// decode the item's request of a paged one.
#pragma once
#include "decode_epilogue.cuh"
#include "decode_params.h"
#include "decode_work.cuh"
#include "fragment_softmax.cuh"
#include "kv_source.cuh"
#include "mma.cuh"
#include "numeric.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, int HeadsPerCta, class QT, class KVT, class OT, int PosMode, bool SoftCap, int Warps,
          template <class> class KVSourceT, int MaskMode = kernels::kMaskNone>
struct DecodeMmaTraits {
  static_assert(HeadDim == 64 || HeadDim == 128, "tensor-core decode supports head_dim 64 and 128");
  static_assert(HeadsPerCta >= 1 && HeadsPerCta <= 16, "the group is the 16-row M dimension");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeads = HeadsPerCta;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kTileRows = 16 * Warps;                  // 16 KV rows per warp
  static constexpr int kLanesPerRow = HeadDim / 8;
  static constexpr int kRowsPerPass = kThreads / kLanesPerRow;
  static constexpr int kPasses = kTileRows / kRowsPerPass;       // slices per thread per tile
  static constexpr int kStride = HeadDim + 8;                    // smem row pitch: ldmatrix without bank conflicts
  static constexpr int kSmemBytes = kernels::decode_mma_smem_bytes(Warps, HeadDim);
  using q_t = QT;  // also the tensor cores' input type
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  // No window check per row: a work item's rows start inside the window (decode_work.cuh).
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode>;
};

extern __shared__ __align__(16) unsigned char attnjit_decode_mma_smem[];

template <class Tr>
ATTNJIT_DEVICE void single_decode_mma(const kernels::DecodeParams& p) {
  using T = typename Tr::q_t;
  using kv_t = typename Tr::kv_t;
  constexpr int D = Tr::kHeadDim;
  constexpr int kRowBytes = Tr::kStride * 2;
  constexpr int kTileBytes = Tr::kTileRows * kRowBytes;
  constexpr int kRopePartner = Tr::kLanesPerRow / 2;

  const kernels::DecodeWorkItem item = decode_work_item(p);
  if (item.request < 0) return;  // padding of a fixed grid: uniform across the CTA
  const int kv_head = blockIdx.z;
  const int head0 = kv_head * p.group_size + blockIdx.x * Tr::kHeads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slice = tid % Tr::kLanesPerRow, row_in_pass = tid / Tr::kLanesPerRow, dim0 = slice * 8;

  unsigned char* smem = attnjit_decode_mma_smem;
  unsigned char* q_tile = smem;
  // Buffers by arithmetic, not a pointer array: a run-time index into an
  // array would put it in local memory.
  auto k_tile = [&](int buf) { return smem + 16 * kRowBytes + buf * kTileBytes; };
  auto v_tile = [&](int buf) { return smem + 16 * kRowBytes + (2 + buf) * kTileBytes; };

  const typename Tr::KVSource kv(p.kv, item.request);
  const int kv_len = kv.length();
  const int q_pos = kv_len - 1;
  const DecodeWork work = resolve_work(item, p.var.window_left, kv_len);
  const char* q_base = static_cast<const char*>(p.q) + work.request * p.q_stride_b * 2;
  // This thread's two query rows (g, g + 8) in the S and O fragments.
  const typename Tr::Variant var_lo(p.var, work.request, head0 + min(g, Tr::kHeads - 1), p.num_qo_heads, kv_len);
  const typename Tr::Variant var_hi(p.var, work.request, head0 + min(g + 8, Tr::kHeads - 1), p.num_qo_heads, kv_len);

  // Q tile: rows are heads (zero past kHeads), transformed, unscaled.
  for (int item = tid; item < 16 * Tr::kLanesPerRow; item += Tr::kThreads) {
    const int r = item / Tr::kLanesPerRow, d0 = (item % Tr::kLanesPerRow) * 8;
    frag8 qf;
    qf.zero();
    if (r < Tr::kHeads)
      qf = load8<typename Tr::q_t>(q_base + ((head0 + r) * p.q_stride_h + d0) * 2);
    var_lo.template transform_query<D>(qf, q_pos, d0, kRopePartner);  // the same for every head
    store_smem8<T>(q_tile + r * kRowBytes + d0 * 2, qf);
  }

  const int begin = work.begin, end = work.end;
  const auto kv_slice = kv.slice(kv_head, dim0);  // bound here, after the query: fewer registers live across it

  raw8<kv_t> k_raw[Tr::kPasses], v_raw[Tr::kPasses];
  auto load_tile = [&](int base) {
#pragma unroll
    for (int s = 0; s < Tr::kPasses; ++s) {
      const int r = min(base + s * Tr::kRowsPerPass + row_in_pass, end - 1);  // past the end: masked later
      const KVRowAddress at = kv_slice.row(r);
      k_raw[s] = load_raw8<kv_t>(at.k);
      v_raw[s] = load_raw8<kv_t>(at.v);
    }
  };
  auto store_tile = [&](int buf, int base) {
#pragma unroll
    for (int s = 0; s < Tr::kPasses; ++s) {
      const int r = s * Tr::kRowsPerPass + row_in_pass;
      frag8 kf = to_frag8(k_raw[s]);
      var_lo.template transform_key<D>(kf, base + r, dim0, kRopePartner);  // the same for every head
      store_smem8<T>(k_tile(buf) + r * kRowBytes + dim0 * 2, kf);
      store_smem8<T>(v_tile(buf) + r * kRowBytes + dim0 * 2, to_frag8(v_raw[s]));
    }
  };

  // An empty chunk (past a device-side length) loads nothing: row end - 1 may not exist.
  if (begin < end) {
    load_tile(begin);
    store_tile(0, begin);
  }
  __syncthreads();

  frag_a qa[D / 16];
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks)
    ldmatrix_x4(qa[ks].x, q_tile + (lane % 16) * kRowBytes + (ks * 16 + (lane / 16) * 8) * 2);

  RowState rows;
  rows.init();
  frag_c o[D / 8];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n].zero();

  int buf = 0;
  for (int base = begin; base < end; base += Tr::kTileRows) {
    const bool more = base + Tr::kTileRows < end;  // uniform across the CTA
    if (more) load_tile(base + Tr::kTileRows);

    // S = Q K^T on this warp's 16 rows: two 8-row n-tiles.
    frag_c s[2];
    s[0].zero();
    s[1].zero();
    const unsigned char* kw = k_tile(buf) + warp * 16 * kRowBytes;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t r[4];
      ldmatrix_x4(r, kw + ((lane & 7) + ((lane >> 4) << 3)) * kRowBytes + (ks * 16 + ((lane >> 3) & 1) * 8) * 2);
      mma_16816<T>(s[0], qa[ks], frag_b{{r[0], r[1]}});
      mma_16816<T>(s[1], qa[ks], frag_b{{r[2], r[3]}});
    }

    // The variant turns S into base-2 logits (masked rows -inf), then the
    // online softmax makes it P and rescales what O holds so far.
    const int col0 = base + warp * 16;
    map_tile(s, [&](int half, int col, float x) {
      const auto& var = half == 0 ? var_lo : var_hi;
      const int j = col0 + col;
      return j < end && var.keep(q_pos, j) ? var.logit(x * var.q_scale, j) : neg_inf();
    });
    float tile_max[2], scale[2];
    row_max(s, tile_max);
    rows.raise_max(tile_max, scale);
    rescale(o, scale);
    rows.exp2_and_sum(s);
    // O += P V, P (16 x 16 KV rows) as an A fragment.
    const frag_a pa = to_a_fragment<T>(s[0], s[1]);
    const unsigned char* vw = v_tile(buf) + warp * 16 * kRowBytes;
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, vw + ((lane & 7) + (((lane >> 3) & 1) << 3)) * kRowBytes + (nd * 16 + (lane >> 4) * 8) * 2);
      mma_16816<T>(o[2 * nd], pa, frag_b{{r[0], r[1]}});
      mma_16816<T>(o[2 * nd + 1], pa, frag_b{{r[2], r[3]}});
    }

    if (more) store_tile(buf ^ 1, base + Tr::kTileRows);
    __syncthreads();
    buf ^= 1;
  }

  // Row sums across the quad, then the warps' states through shared memory.
  // They overwrite the Q tile: after a loop the last barrier already ordered
  // every ldmatrix of it before these stores, but an empty chunk (a split past
  // a device-side length) skips the loop, so the barrier is taken here
  // (compute-sanitizer racecheck found the race; uniform across the CTA).
  if (begin >= end) __syncthreads();
  rows.finalize();
  constexpr int kRec = D + 2;
  float* states = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float* rec = states + (warp * 16 + g + 8 * h) * kRec;
    if (t == 0) {
      rec[0] = rows.m[h];
      rec[1] = rows.d[h];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      rec[2 + n * 8 + 2 * t] = o[n].x[2 * h];
      rec[2 + n * 8 + 2 * t + 1] = o[n].x[2 * h + 1];
    }
  }
  __syncthreads();

  merge_warps_and_store<typename Tr::o_t, D, Tr::kHeads, Tr::kWarps, 16>(states, work, head0, p);
}

}  // namespace attnjit
