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
