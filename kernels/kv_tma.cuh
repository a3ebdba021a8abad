// Which KV sources the TMA can copy (kv_source.cuh): those whose request is
// a run of rows of one strided tensor (contiguous, ragged), addressed by the
// K/V tensor maps (prefill_ws_params.h) at row first_row() + j. Paged
// sources are gathered row by row instead.
#pragma once
#include "kv_source.cuh"

namespace attnjit {

template <class Source>
struct KVTma {
  static constexpr bool kTma = false;
};
template <class KVT>
struct KVTma<ContiguousKV<KVT>> {
  static constexpr bool kTma = true;
  static ATTNJIT_DEVICE int first_row(const ContiguousKV<KVT>&) { return 0; }
};
template <class KVT>
struct KVTma<RaggedKV<KVT>> {
  static constexpr bool kTma = true;
  static ATTNJIT_DEVICE int first_row(const RaggedKV<KVT>& kv) { return int(kv.first); }
};

}  // namespace attnjit
