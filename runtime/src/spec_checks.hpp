// Field-by-field checks of a KernelSpec against what the kernel templates are
// written for. They run before any compile (Engine::prepare's first step,
// prewarm's manifest reading), so that a spec the templates cannot take fails
// with a message naming the field, its value and the allowed set, instead of
// reaching NVRTC and failing there as a static_assert (after lock files and
// folders were made for it).
#pragma once
#include <string_view>

#include "kernel_spec.hpp"

namespace attnjit {

// Throws Error(InvalidArgument) naming `<where>.<field>`; `where` is how the
// caller's user knows the spec (e.g. "spec", "manifest k.json: /kernels/3").
void check_kernel_spec(const KernelSpec& s, std::string_view where = "spec");

// The largest dynamic shared memory any supported GPU grants one CTA
// (sm_90/sm_100: 227 KiB); a spec needing more can never launch.
inline constexpr int kMaxDynamicSmemBytes = 227 * 1024;

}  // namespace attnjit
