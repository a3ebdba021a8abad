// Decode attention on tensor cores, for grouped-query heads. The MMAs are
// key-major (key_major_softmax.cuh): S^T = K Q^T and O^T = V^T P^T, with 16
// keys, or 16 head dims, as the M dimension of mma.m16n8k16 and the CTA's
// query rows (the kHeads heads sharing a KV head) as N, 8 per n-tile. The
// query-major form (S = Q K^T) padded a GQA group of 4 to M = 16 and held O
// in 64 registers for 4 rows; key-major, N pads 4 rows to 8 only, O^T takes
// 32 registers and P V half the MMAs (166 registers instead of 232 at d 128;
// kDecodeMmaCtasPerSm says why two CTAs per SM, not three). P^T reaches the
// B operand through movmatrix. With several
// query tokens per request (speculative decoding), the rows are kTokens
// tokens x kHeads heads (decode_queries.cuh), each row with its own position,
// which the variant's causal mask compares with the key's.
//
// Grid (group_size / kHeads * token tiles, work items, num_kv_heads), 4 warps
// (work items: decode_work.cuh). Each iteration the CTA stages a tile of K and V: every
// thread loads 16-byte slices of its rows (the next tile's loads are in
// flight while this one computes), widens them to the MMA's 16-bit type
// (fp8 -> f16 exactly, without going through float; the variant's key
// transform, if any, in float) and stores them to shared memory; each warp
// then computes on its rows S^T = K Q^T, the online softmax on the S^T
// fragments, and O^T += V^T P^T. A warp loads and stages
// exactly the rows it computes on, so the loop needs no CTA barrier.
//
// A tile holds the same bytes of K/V whatever their type, so as many bytes
// are in flight per SM for fp8 as for 16-bit KV and fp8 streams at the same
// bytes/s, twice the rows/s: 16 rows per warp for 16-bit KV, double
// buffered; 32 for fp8 (two 16-row MMA tiles), whose widened tile takes both
// buffers' shared memory and is single buffered (one more __syncwarp per tile).
// Warps merge their states at the end,
// like the CUDA-core skeleton. K and V are found through the KV source
// (kv_source.cuh): single decode reads request 0 of a contiguous source, batch
// decode the item's request of a paged one.
#pragma once
#include "decode_epilogue.cuh"
#include "decode_params.h"
#include "decode_prefetch.cuh"
#include "decode_queries.cuh"
#include "decode_row_variant.cuh"
#include "decode_scales.cuh"
#include "decode_work.cuh"
#include "key_major_softmax.cuh"
#include "kv_source.cuh"
#include "mma.cuh"
#include "numeric.cuh"
#include "variant.cuh"

namespace attnjit {

template <int HeadDim, int HeadsPerCta, class QT, class KVT, class OT, int PosMode, bool SoftCap, int Warps,
          template <class> class KVSourceT, int MaskMode = kernels::kMaskNone, int TokensPerCta = 1>
struct DecodeMmaTraits {
  static_assert(HeadDim == 64 || HeadDim == 128, "tensor-core decode supports head_dim 64 and 128");
  static_assert(HeadsPerCta >= 1 && TokensPerCta >= 1 && HeadsPerCta * TokensPerCta <= 16,
                "the CTA's query rows (heads x tokens) are at most two 8-row n-tiles");
  static_assert(TokensPerCta == 1 || MaskMode == kernels::kMaskCausal || MaskMode == kernels::kMaskDraft,
                "several query tokens of a request are causal among themselves, or follow a draft-tree mask");
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeads = HeadsPerCta;
  static constexpr int kRows = HeadsPerCta * TokensPerCta;
  static constexpr int kQueryTiles = (kRows + 7) / 8;  // 8-row n-tiles of the key-major MMAs
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kKVBytes = storage_bytes<KVT>::value;
  static constexpr int kLoadFrags = 2 / kKVBytes;                 // 8-element fragments per 16-byte load
  static constexpr int kLanesPerRow = HeadDim / (8 * kLoadFrags);
  static constexpr int kRowsPerPass = 32 / kLanesPerRow;         // rows a warp loads per pass
  static constexpr int kSubTiles = 2 / kKVBytes;                  // 16-row MMA tiles per warp and tile
  static constexpr int kWarpRows = 16 * kSubTiles;
  static constexpr int kTileRows = kWarpRows * Warps;
  static constexpr int kBuffers = 2 / kSubTiles;
  static constexpr int kPasses = kWarpRows / kRowsPerPass;       // loads per thread per tile, each of K and V
  static constexpr int kStride = HeadDim + 8;                    // smem row pitch: ldmatrix without bank conflicts
  using q_t = QT;
  using mma_t = typename mma_input<QT, KVT>::type;  // the tensor cores' input type, and the smem tiles'
  using kv_t = KVT;
  using o_t = OT;
  using KVSource = KVSourceT<KVT>;
  using Rows = DecodeQueryRows<HeadsPerCta, TokensPerCta>;
  // A work item's rows start inside the window of the request's first token
  // (decode_work.cuh), so one token needs no window check per row; with
  // several (causal or a draft mask), later tokens' windows start later and are checked.
  using Variant = AttentionVariant<PosMode, SoftCap, MaskMode, MaskMode != kernels::kMaskNone>;
  // Keys and queries transformed in float (RoPE) reach the MMA as a rounded
  // part and the rest (split8), and S takes three MMAs per product instead of
  // one: rounding the rotated q and k once cost up to 3e-2 of lse (bf16),
  // where un-rotated 16-bit inputs lose nothing. Decode is bound by memory,
  // not by the MMAs.
  static constexpr bool kSplitQK = Variant::kTransformsKeys;
  static constexpr int kSmemBytes = kernels::decode_mma_smem_bytes(Warps, HeadDim, kSplitQK);
  static constexpr int kCtasPerSm = kernels::kDecodeMmaCtasPerSm;
  static_assert((16 + 2 * kBuffers * kTileRows + (kSplitQK ? 16 + kBuffers * kTileRows : 0)) * kStride * 2 <= kSmemBytes,
                "tiles exceed the planned smem");
};

extern __shared__ __align__(16) unsigned char attnjit_decode_mma_smem[];

template <class Tr>
ATTNJIT_DEVICE void single_decode_mma(const kernels::DecodeParams& p) {
  using T = typename Tr::mma_t;
  using kv_t = typename Tr::kv_t;
  constexpr int D = Tr::kHeadDim;
  constexpr int kRowBytes = Tr::kStride * 2;
  constexpr int kTileBytes = Tr::kTileRows * kRowBytes;
  constexpr int kQSlices = D / 8;                        // the Q tile is staged 8 elements per thread
  constexpr int kRopePartner = Tr::kLanesPerRow / 2;     // the lane holding a K slice's dims +- D/2

  const kernels::DecodeWorkItem item = decode_cta_start<typename Tr::KVSource, Tr::kHeadDim>(p);
  if (item.request < 0) return;  // padding of a fixed grid: uniform across the CTA
  const int kv_head = decode_kv_head();
  const typename Tr::Rows queries(p, item.request, kv_head);
  if (queries.empty()) return;  // a token tile past the request's tokens: uniform across the CTA
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slice = lane % Tr::kLanesPerRow, row_in_pass = lane / Tr::kLanesPerRow;
  const int chunk0 = slice * Tr::kLoadFrags, dim0 = chunk0 * 8;  // this thread's first K/V element of a row

  const uint32_t smem = smem_addr(attnjit_decode_mma_smem);  // 32-bit shared-window addresses (mma.cuh)
  const uint32_t q_tile = smem;
  // Buffers by arithmetic, not a pointer array: a run-time index into an
  // array would put it in local memory.
  auto k_tile = [&](int buf) { return smem + 16 * kRowBytes + buf * kTileBytes; };
  auto v_tile = [&](int buf) { return smem + 16 * kRowBytes + (Tr::kBuffers + buf) * kTileBytes; };
  // kSplitQK: the rests of the rotated Q and K tiles, after the V tiles.
  const uint32_t q_rest_tile = smem + 16 * kRowBytes + 2 * Tr::kBuffers * kTileBytes;
  auto k_rest_tile = [&](int buf) { return q_rest_tile + 16 * kRowBytes + buf * kTileBytes; };
  // The 16-byte chunk c (elements 8c..8c+7) of a K/V tile row. Chunks 8-15
  // swap in pairs, so the 8 lanes of a store phase, which write chunks
  // 2l (+1) when a lane holds 16 fp8 elements, hit distinct banks; the
  // ldmatrix reads take whole chunks and follow the same map.
  auto chunk = [](int c) { return (c ^ ((c >> 3) & 1)) * 16; };

  const typename Tr::KVSource kv(p.kv, item.request);
  const int kv_len = kv.length();
  const DecodeWork work = resolve_work(item, p.var.window_left, kv_len, queries.q_len);
  // This thread's query rows, 2t + c of each n-tile (the columns of S^T and
  // O^T); rows past kRows are padding and borrow the last row's variant
  // (never stored).
  typename Tr::Variant vars[Tr::kQueryTiles][2];
  int q_pos[Tr::kQueryTiles][2];
  const kernels::VariantParams var = decode_variant_params(p);  // the scale factor read once, here
#pragma unroll
  for (int n = 0; n < Tr::kQueryTiles; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int row = min(n * 8 + 2 * t + c, Tr::kRows - 1);
      // A draft mask's padding rows take the last token's row (decode_row_variant.cuh).
      q_pos[n][c] = Tr::Variant::MaskT::kMode == kernels::kMaskDraft ? queries.mask_q_pos(row, kv_len)
                                                                     : queries.q_pos(row, kv_len);
      vars[n][c] = decode_row_variant<typename Tr::Variant>(var, p, queries, work.request, row, kv_len);
    }
  }
  const typename Tr::Variant& any_row = vars[0][0];  // for the hooks that do not depend on the row (RoPE)

  const int begin = work.begin, end = work.end;
  const auto kv_slice = kv.slice(kv_head, dim0);

  raw8<kv_t> k_raw[Tr::kPasses][Tr::kLoadFrags], v_raw[Tr::kPasses][Tr::kLoadFrags];
  auto load_tile = [&](int base) {
#pragma unroll
    for (int s = 0; s < Tr::kPasses; ++s) {
      const int r = min(base + warp * Tr::kWarpRows + s * Tr::kRowsPerPass + row_in_pass, end - 1);  // past the end: masked later
      const KVRowAddress at = kv_slice.row(r);
      load_raw16<kv_t>(at.k, k_raw[s]);
      load_raw16<kv_t>(at.v, v_raw[s]);
    }
  };
  auto store_tile = [&](int buf, int base) {
    if constexpr (Tr::kSplitQK) {
      // A key transform (RoPE), the same for every head. A thread's rows are
      // kRowsPerPass apart, so it walks them slice by slice (the variant's
      // key_rotation); the keys go in float, then as a rounded part and the rest.
      const int row0 = warp * Tr::kWarpRows + row_in_pass;  // this thread's first row of the tile
#pragma unroll
      for (int f = 0; f < Tr::kLoadFrags; ++f) {
        auto rotation = any_row.template key_rotation<D>(base + row0, Tr::kRowsPerPass, dim0 + 8 * f);
#pragma unroll
        for (int s = 0; s < Tr::kPasses; ++s) {
          const uint32_t at = (row0 + s * Tr::kRowsPerPass) * kRowBytes + chunk(chunk0 + f);
          frag8 kf = to_frag8(k_raw[s][f]);
          rotation.rotate_and_step(kf, kRopePartner);
          const split8<T> parts(kf);
          store_smem8(k_tile(buf) + at, parts.hi);
          store_smem8(k_rest_tile(buf) + at, parts.lo);
          store_smem8(v_tile(buf) + at, widen8(v_raw[s][f]));
        }
      }
    } else {
#pragma unroll
      for (int s = 0; s < Tr::kPasses; ++s) {
        const int r = warp * Tr::kWarpRows + s * Tr::kRowsPerPass + row_in_pass;
        const uint32_t k_row = k_tile(buf) + r * kRowBytes;
        const uint32_t v_row = v_tile(buf) + r * kRowBytes;
#pragma unroll
        for (int f = 0; f < Tr::kLoadFrags; ++f) {
          store_smem8(k_row + chunk(chunk0 + f), widen8(k_raw[s][f]));
          store_smem8(v_row + chunk(chunk0 + f), widen8(v_raw[s][f]));
        }
      }
    }
  };

  // The first tile's loads go out before the Q tile is staged, so the two
  // memory latencies of the prologue overlap instead of adding up (with one
  // wave of CTAs, as single decode runs, the prologue is paid once in full).
  // An empty chunk (past a device-side length) loads nothing: row end - 1 may not exist.
  if (begin < end) load_tile(begin);

  // Q tile: rows are the CTA's (token, head) pairs (zero past kRows and past
  // the request's tokens), transformed at their own positions, unscaled.
  // Only the n-tiles' rows are read: 8 of the 16 when kRows <= 8.
  for (int item = tid; item < Tr::kQueryTiles * 8 * kQSlices; item += Tr::kThreads) {
    const int r = item / kQSlices, d0 = (item % kQSlices) * 8;
    frag8 qf;
    qf.zero();
    if (r < Tr::kRows && queries.stored(r))
      qf = load8<typename Tr::q_t>(static_cast<const char*>(p.q) +
                                   (queries.q_elem(p, r) + queries.head(r) * p.q_stride_h + d0) * 2);
    any_row.template transform_query<D>(qf, queries.q_pos(r, kv_len), d0, kQSlices / 2);  // depends on the position only
    if constexpr (Tr::kSplitQK) {
      const split8<T> parts(qf);
      store_smem8(q_tile + r * kRowBytes + d0 * 2, parts.hi);
      store_smem8(q_rest_tile + r * kRowBytes + d0 * 2, parts.lo);
    } else {
      store_smem8<T>(q_tile + r * kRowBytes + d0 * 2, qf);
    }
  }

  __syncthreads();

  // Q as the B operand of S^T = K Q^T: k-steps of 16 dims x 8 query rows
  // per n-tile, one ldmatrix_x4 per two k-steps. Q's rests (kSplitQK) stay
  // in shared memory, read per k-step: held, their 32 registers per n-tile
  // made the 16-row variants spill.
  // This lane's row address in a Q tile for an ldmatrix of `matrices` 8x8
  // matrices from k-step ks of n-tile n on (8 dims each, the next ones in turn).
  auto q_fragment_at = [&](int n, int ks, int matrices) {
    return uint32_t((n * 8 + (lane & 7)) * kRowBytes + (ks * 16 + ((lane >> 3) % matrices) * 8) * 2);
  };
  frag_b qb[D / 16][Tr::kQueryTiles];
#pragma unroll
  for (int n = 0; n < Tr::kQueryTiles; ++n) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ks += 2) {
      uint32_t r[4];
      ldmatrix_x4(r, q_tile + q_fragment_at(n, ks, 4));
      qb[ks][n] = frag_b{{r[0], r[1]}};
      qb[ks + 1][n] = frag_b{{r[2], r[3]}};
    }
  }

  QueryColumns<Tr::kQueryTiles> rows;
  rows.init();
  frag_c o[D / 16][Tr::kQueryTiles];  // O^T: head-dim rows x query columns
#pragma unroll
  for (int md = 0; md < D / 16; ++md) {
#pragma unroll
    for (int n = 0; n < Tr::kQueryTiles; ++n) o[md][n].zero();
  }

  // Each iteration stores the tile whose loads the last one issued (the
  // prologue, for the first), issues the next tile's, then computes: the
  // loads stay in flight while the warp computes, and store_tile, with its
  // widening and RoPE, is written out once (one call site; two made RoPE
  // variants twice as long to compile).
  int buf = 0;
  for (int base = begin; base < end; base += Tr::kTileRows) {
    // A warp stages exactly the rows it computes on, so only the warp
    // synchronizes: warps run out of step, some loading while others compute.
    // One buffer: the warp's reads of its rows are done before it overwrites them.
    if (Tr::kBuffers == 1) __syncwarp();
    store_tile(buf, base);
    __syncwarp();
    if (base + Tr::kTileRows < end) load_tile(base + Tr::kTileRows);  // uniform across the CTA

    const int row0 = warp * Tr::kWarpRows;  // this warp's first row in the tile
    const int col0 = base + row0;
    if (col0 < end) {  // uniform across the warp; else it holds only rows past the end
      // S^T = K Q^T on the warp's rows: K's 16-key m-tiles as A fragments.
      frag_c s[Tr::kSubTiles][Tr::kQueryTiles];
#pragma unroll
      for (int sub = 0; sub < Tr::kSubTiles; ++sub) {
#pragma unroll
        for (int n = 0; n < Tr::kQueryTiles; ++n) s[sub][n].zero();
        const uint32_t kw = k_tile(buf) + (row0 + sub * 16 + (lane & 15)) * kRowBytes;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          frag_a k;
          ldmatrix_x4(k.x, kw + chunk(2 * ks + (lane >> 4)));
#pragma unroll
          for (int n = 0; n < Tr::kQueryTiles; ++n) mma_16816<T>(s[sub][n], k, qb[ks][n]);
          if constexpr (Tr::kSplitQK) {  // + k_hi q_rest + k_rest q_hi
            frag_a k_rest;
            ldmatrix_x4(k_rest.x, kw - k_tile(buf) + k_rest_tile(buf) + chunk(2 * ks + (lane >> 4)));
#pragma unroll
            for (int n = 0; n < Tr::kQueryTiles; ++n) {
              frag_b q_rest;
              ldmatrix_x2(q_rest.x, q_rest_tile + q_fragment_at(n, ks, 2));
              mma_16816<T>(s[sub][n], k, q_rest);
              mma_16816<T>(s[sub][n], k_rest, qb[ks][n]);
            }
          }
        }
      }

      // The variant turns S^T into base-2 logits (masked keys -inf), then the
      // online softmax makes it P^T and rescales what O^T holds so far: once
      // per warp tile, however many MMA tiles it spans.
      map_key_major(s, [&](int n, int c, int key, float x) {
        const auto& var = vars[n][c];
        const int j = col0 + key;
        return j < end && var.keep(q_pos[n][c], j) ? var.logit(x * var.q_scale, j) : neg_inf();
      });
      float shrink[Tr::kQueryTiles][2];
      rows.raise_max(s, shrink);
      rows.rescale(o, shrink);
      rows.exp2_and_sum(s);
      // O^T += V^T P^T: V^T's 16-dim m-tiles as A fragments (V rows
      // transposed on the way out of shared memory), P^T as B.
#pragma unroll
      for (int sub = 0; sub < Tr::kSubTiles; ++sub) {
        frag_b pb[Tr::kQueryTiles];
#pragma unroll
        for (int n = 0; n < Tr::kQueryTiles; ++n) pb[n] = to_b_fragment<T>(s[sub][n]);
        const uint32_t vw = v_tile(buf) + (row0 + sub * 16 + (lane & 7) + ((lane >> 4) << 3)) * kRowBytes;
#pragma unroll
        for (int md = 0; md < D / 16; ++md) {
          frag_a v;
          ldmatrix_x4_trans(v.x, vw + chunk(2 * md + ((lane >> 3) & 1)));
#pragma unroll
          for (int n = 0; n < Tr::kQueryTiles; ++n) mma_16816<T>(o[md][n], v, pb[n]);
        }
      }
    }

    buf ^= Tr::kBuffers - 1;
  }

  pdl_launch_dependents();  // the next kernel may start its prologue: this CTA only merges and stores now
  kv_slice.report_bad_pages(kv_len);  // cold: only where a page id was bad

  // Row sums across the lanes holding a row's keys, then the warps' states
  // through shared memory. They overwrite the Q tile and other warps' K/V
  // rows, which those warps may still be reading (the loop synchronizes only
  // within a warp; an empty chunk skips the loop), hence a CTA barrier first.
  __syncthreads();
  rows.finalize();
  constexpr int kRec = D + 2;
  float* states = reinterpret_cast<float*>(attnjit_decode_mma_smem);
#pragma unroll
  for (int n = 0; n < Tr::kQueryTiles; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float* rec = states + (warp * 16 + n * 8 + 2 * t + c) * kRec;
      if (g == 0) {
        rec[0] = rows.m[n][c];
        rec[1] = rows.d[n][c];
      }
#pragma unroll
      for (int md = 0; md < D / 16; ++md) {
        rec[2 + md * 16 + g] = o[md][n].x[c];
        rec[2 + md * 16 + g + 8] = o[md][n].x[2 + c];
      }
    }
  }
  __syncthreads();

  finish_decode<typename Tr::o_t, D, typename Tr::Rows, Tr::kWarps, 16>(states, work, queries, p);
}

}  // namespace attnjit
