// A tile of 16-bit elements (or, counted in pairs, bytes) in shared memory in the layout wgmma reads
// (wgmma.cuh): columns in blocks of 64 (128 bytes a row), each block Rows
// rows of 128 bytes, and within every 8 rows (1024 bytes) the eight 16-byte
// chunks of row r permuted by chunk ^ (r % 8), the hardware's 128-byte
// swizzle. Copies and epilogue stores land through at(); the MMA reads
// through descriptors:
//
//   k_major(row0, k0)   rows row0.., the 16 columns from k0, contiguous along K   Q as A, K as B of S = Q K^T
//   mn_major(k0)        rows k0..k0+15 as K, every column as N                     V as B of O = P V
//
// The tile's base is 1024-byte aligned (the swizzle is on address bits). Both are the base's
// descriptor plus a byte offset (wgmma_desc_advance), constants in the unrolled MMA loops.
#pragma once
#include "mma.cuh"
#include "numeric.cuh"
#include "wgmma.cuh"

namespace attnjit {

template <int HeadDim, int Rows>
struct SwizzledTile {
  static_assert(HeadDim % 64 == 0 && Rows % 8 == 0, "whole 128-byte blocks of whole 8-row swizzle atoms");
  static constexpr int kBlockBytes = Rows * 128;
  static constexpr int kBytes = HeadDim / 64 * kBlockBytes;
  uint32_t base;

  // The element (row, col): 16-byte chunk col / 8 of the row, permuted.
  ATTNJIT_DEVICE uint32_t at(int row, int col) const {
    return base + (col >> 6) * kBlockBytes + row * 128 + ((((col >> 3) & 7) ^ (row & 7)) << 4) + (col & 7) * 2;
  }

  // Byte c of row `row`, for tiles of 1-byte elements (fp8) laid out the
  // same way: 128 of them a 128-byte row, a column of this type two bytes.
  ATTNJIT_DEVICE uint32_t at_byte(int row, int c) const {
    return base + (c >> 7) * kBlockBytes + row * 128 + ((((c >> 4) & 7) ^ (row & 7)) << 4) + (c & 15);
  }

  // Leading byte offset unused with K-major swizzling (the PTX ISA says 1);
  // 8-row groups 1024 bytes apart; k0 within a block moves the start by
  // 32 bytes per 16 columns, and the hardware swizzles the sum.
  ATTNJIT_DEVICE uint64_t k_major(int row0, int k0) const {
    return wgmma_desc_advance(wgmma_desc_sw128(base, 16, 1024), (k0 >> 6) * kBlockBytes + row0 * 128 + (k0 & 63) * 2);
  }
  // N-major: 64-column blocks kBlockBytes apart (leading), 8-row groups of
  // K 1024 bytes apart (stride).
  ATTNJIT_DEVICE uint64_t mn_major(int k0) const {
    return wgmma_desc_advance(wgmma_desc_sw128(base, kBlockBytes, 1024), k0 * 128);
  }
};

}  // namespace attnjit
