// attnjit_merge_state.h: merge_state, merge_state_in_place and merge_states
// over DLTensors. Each function converts its tensors (from_dlpack names the
// argument in every refusal), checks what the C++ API takes as a raw
// pointer (the in-place mask), and runs the C++ call in guard(), so no
// exception crosses the boundary. The C++ calls check shapes, dtypes,
// strides and devices against each other (ops/merge_state/merge_state.cpp).
#include "attnjit/attnjit_merge_state.h"

#include <optional>
#include <utility>

#include "api/c_api_device_vectors.hpp"
#include "api/c_api_guard.hpp"
#include "api/c_api_handles.hpp"
#include "attnjit/merge_state.hpp"
#include "attnjit/tensor.hpp"

namespace {

using attnjit::capi::as_stream;
using attnjit::capi::guard;
using attnjit::capi::kRuntimeHandle;
using attnjit::capi::require_non_null;

// DLPack >= 0.8's kDLBool: the code torch exports bool tensors with (this
// build's dlpack.h, 0.6, predates it).
constexpr uint8_t kDLBoolCode = 6;

// A state's V and its log-sum-exp S, converted in that order (a refusal names V first).
std::pair<attnjit::TensorView, attnjit::TensorView> state_views(const DLTensor* v, const char* v_arg, const DLTensor* s,
                                                                const char* s_arg) {
  attnjit::TensorView v_view = attnjit::from_dlpack(v, v_arg);
  return {v_view, attnjit::from_dlpack(s, s_arg)};
}

std::optional<attnjit::TensorView> optional_view(const DLTensor* t, const char* arg) {
  if (!t) return std::nullopt;
  return attnjit::from_dlpack(t, arg);
}

// The mask's device bytes, one per sequence position of v; NULL: merge all.
// A v of the wrong rank is left to the C++ call to refuse, by name.
const uint8_t* row_mask(const DLTensor* mask, const attnjit::TensorView& v) {
  if (mask == nullptr || v.ndim != 3) return nullptr;
  const attnjit::capi::DeviceVectorRule rule{
      {DLDataType{kDLBoolCode, 8, 1}, DLDataType{kDLUInt, 8, 1}, DLDataType{kDLInt, 8, 1}},
      "bool (kDLBool, 8), uint8 (kDLUInt, 8) or int8 (kDLInt, 8)",
      "seq_len",
      v.shape[0],
      "v",
      v.device};
  return static_cast<const uint8_t*>(attnjit::capi::device_vector(mask, "mask", rule));
}

}  // namespace

extern "C" {

attnjit_status_t attnjit_merge_state(attnjit_runtime_t* rt, const DLTensor* v_a, const DLTensor* s_a,
                                     const DLTensor* v_b, const DLTensor* s_b, DLTensor* v_merged,
                                     DLTensor* s_merged, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_merge_state", "rt", kRuntimeHandle);
    const auto [va, sa] = state_views(v_a, "v_a", s_a, "s_a");
    const auto [vb, sb] = state_views(v_b, "v_b", s_b, "s_b");
    const auto vm = attnjit::from_dlpack(v_merged, "v_merged");
    const auto sm = optional_view(s_merged, "s_merged");
    attnjit::merge_state(rt->runtime, va, sa, vb, sb, vm, sm ? &*sm : nullptr, as_stream(stream));
  });
}

attnjit_status_t attnjit_merge_state_in_place(attnjit_runtime_t* rt, DLTensor* v, DLTensor* s,
                                              const DLTensor* v_other, const DLTensor* s_other, const DLTensor* mask,
                                              void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_merge_state_in_place", "rt", kRuntimeHandle);
    const auto [vv, sv] = state_views(v, "v", s, "s");
    const auto [vo, so] = state_views(v_other, "v_other", s_other, "s_other");
    const uint8_t* m = row_mask(mask, vv);
    attnjit::merge_state_in_place(rt->runtime, vv, sv, vo, so, m, as_stream(stream));
  });
}

attnjit_status_t attnjit_merge_states(attnjit_runtime_t* rt, const DLTensor* v, const DLTensor* s,
                                      DLTensor* v_merged, DLTensor* s_merged, void* stream) {
  return guard([&] {
    require_non_null(rt, "attnjit_merge_states", "rt", kRuntimeHandle);
    const auto [vv, sv] = state_views(v, "v", s, "s");
    const auto vm = attnjit::from_dlpack(v_merged, "v_merged");
    const auto sm = optional_view(s_merged, "s_merged");
    attnjit::merge_states(rt->runtime, vv, sv, vm, sm ? &*sm : nullptr, as_stream(stream));
  });
}

}  // extern "C"
