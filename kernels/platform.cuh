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
}  // namespace attnjit
#endif
