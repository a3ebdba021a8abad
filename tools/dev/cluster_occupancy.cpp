// How many thread-block clusters of a decode-sized CTA fit the GPU at once
// (cuOccupancyMaxActiveClusters), and where a launch of them lands: the
// question behind merging a split request's partial states in a cluster.
// For each cluster size and
// CTA shape it prints the active-cluster limit against what a grid of 8 KV
// heads needs, then launches that grid with CTAs that spin 200 us and
// reports the spread of their start times (> 100 us: a second wave).
// Build on the CPU machine, run on the GPU one:
//   g++ -O2 -std=c++17 tools/dev/cluster_occupancy.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcuda -lnvrtc -o cluster_occupancy
#include <cuda.h>
#include <nvrtc.h>
#include <cstdio>
#include <vector>
#include <set>
#define CK(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); printf("%s: %s\n", #x, s); return 1; } } while (0)
static const char* src = R"(
extern "C" __global__ void k(unsigned* out, unsigned long long spin) {
  extern __shared__ char sm[];
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned rank; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  unsigned long long t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned long long t = t0; while (t - t0 < spin) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (threadIdx.x == 0) { unsigned b = blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y;
    out[3*b] = smid; out[3*b+1] = rank; out[3*b+2] = (unsigned)(t0 >> 10); sm[0] = 1; }
}
)";
int main() {
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  nvrtcProgram prog; nvrtcCreateProgram(&prog, src, "p.cu", 0, 0, 0);
  const char* opts[] = {"--gpu-architecture=sm_90a"};
  if (nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) { size_t n; nvrtcGetProgramLogSize(prog, &n); std::vector<char> l(n); nvrtcGetProgramLog(prog, l.data()); printf("%s\n", l.data()); return 1; }
  size_t n; nvrtcGetCUBINSize(prog, &n); std::vector<char> cubin(n); nvrtcGetCUBIN(prog, cubin.data());
  CUmodule mod; CK(cuModuleLoadData(&mod, cubin.data())); CUfunction f; CK(cuModuleGetFunction(&f, mod, "k"));
  CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  int sms; cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  printf("SMs %d\n", sms);
  struct Cfg { int cluster, threads, smem, ctas; } cfgs[] = {{16, 256, 151552, 128}, {8, 256, 151552, 128}, {16, 128, 75776, 256}, {8, 128, 75776, 256}, {4, 256, 151552, 128}, {2, 256, 151552, 128}};
  CUdeviceptr out; CK(cuMemAlloc(&out, 3 * 4 * 1024));
  for (auto c : cfgs) {
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c.smem));
    CUlaunchConfig cfg{}; CUlaunchAttribute at[1]; at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[0].value.clusterDim.x = 1; at[0].value.clusterDim.y = 1; at[0].value.clusterDim.z = c.cluster;
    cfg.gridDimX = 1; cfg.gridDimY = 8; cfg.gridDimZ = c.ctas / 8;  // decode's grid: (1, KV heads, splits), clusters along z
    cfg.blockDimX = c.threads; cfg.blockDimY = 1; cfg.blockDimZ = 1; cfg.sharedMemBytes = c.smem; cfg.attrs = at; cfg.numAttrs = 1;
    int clusters = -1; CUresult r = cuOccupancyMaxActiveClusters(&clusters, f, &cfg);
    printf("cluster %2d threads %d smem %d: max active clusters %d (%s); need %d\n", c.cluster, c.threads, c.smem, clusters, r == CUDA_SUCCESS ? "ok" : "err", c.ctas / c.cluster);
    unsigned long long spin = 200000; void* args[] = {&out, &spin};
    r = cuLaunchKernelEx(&cfg, f, args, nullptr); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); printf("  launch: %s\n", s); continue; }
    CK(cuCtxSynchronize());
    std::vector<unsigned> h(3 * c.ctas); CK(cuMemcpyDtoH(h.data(), out, 4 * h.size()));
    unsigned tmin = ~0u, tmax = 0; std::set<unsigned> smset; int maxper = 0; std::vector<int> per(200, 0);
    for (int b = 0; b < c.ctas; ++b) { tmin = std::min(tmin, h[3*b+2]); tmax = std::max(tmax, h[3*b+2]); smset.insert(h[3*b]); maxper = std::max(maxper, ++per[h[3*b]]); }
    printf("  distinct SMs %zu, max CTAs on one SM %d, start spread %.1f us (spin 200 us: >100 means a second wave)\n", smset.size(), maxper, (tmax - tmin) * 1.024);
  }
  return 0;
}
