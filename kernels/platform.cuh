// Fixed-width integers and qualifiers for device code compiled by NVRTC with
// no toolkit header and no include path (DESIGN: generated code is
// self-contained), and for host code that shares the params structs.
#pragma once

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>  // host builds only (the params structs are shared)
#endif

#if defined(__CUDACC__)
#define ATTNJIT_DEVICE __device__ __forceinline__
#define ATTNJIT_HOST_DEVICE __host__ __device__
#else
#define ATTNJIT_DEVICE inline
#define ATTNJIT_HOST_DEVICE
#endif

#if defined(__CUDACC__)
namespace attnjit {
// Programmatic dependent launch (sm_90+; nothing on older archs). A kernel
// launched with programmatic stream serialization may start while the
// previous kernel on the stream still runs: pdl_wait() blocks until that
// kernel has completed and its writes are visible, so it goes before the
// first global read; pdl_launch_dependents() lets the next kernel start
// launching once every CTA of this one has called it (or exited). Without
// the launch attribute both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Warms L2 with `bytes` at p (both multiples of 16; sm_90+, nothing on
// older archs): a hint, not a read, so it may go out before pdl_wait()
// even where the previous kernel writes those bytes. L2 is where every
// SM's writes land, so a line fetched early is updated there, never stale.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Memory-model atomics at GPU scope (PTX ISA 6.0, sm_70+), for counters
// that CTAs of one grid hand results over with.
__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void store_relaxed(int* p, int v) {
  asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
}  // namespace attnjit
#endif
