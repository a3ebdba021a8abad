// A TMA tensor map as a kernel parameter: 128 opaque bytes, 64-byte aligned,
// encoded on the host by cuTensorMapEncodeTiled (CUtensorMap's layout; the
// device code never reads the fields). Included by host and device code.
#pragma once
#include "platform.cuh"

namespace attnjit {
namespace kernels {

struct alignas(64) TmaMap {
  uint64_t opaque[16];
};

}  // namespace kernels
}  // namespace attnjit
