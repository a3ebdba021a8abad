// What the tools (the CLI's prewarm, explain, info and bench) ask of the
// runtime beyond serving calls: the JIT path of one kernel, its cache key and
// generated source, device limits, NVRTC and cache facts, and a timing stream.
// Kernels are named by KernelSpec, the type the operator registry
// (runtime/src/ops/registry.hpp) hands out: tools built with the library's
// sources have it, so this header only declares it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnjit/export.h"

namespace attnjit {

class KernelSpec;
class Runtime;

namespace introspect {

// ---- archs ------------------------------------------------------------------

// The archs attnjit compiles for (sm_80 and newer, NVRTC's spelling).
ATTNJIT_API const std::vector<std::string>& known_archs();
// Error(InvalidArgument) "<argument>='<arch>' is not a known arch; allowed: ..."
// before anything compiles or any cache folder is made.
ATTNJIT_API void check_arch(std::string_view arch, std::string_view argument);

// ---- one kernel through the JIT ----------------------------------------------

enum class Origin { Memory, Disk, Compiled };
ATTNJIT_API const char* to_string(Origin origin) noexcept;

struct PreparedKernel {
  std::string key;  // the cache key
  Origin origin = Origin::Memory;
};

// Compiles the kernel for `arch` or finds it (memory, then disk); no device needed.
ATTNJIT_API PreparedKernel prepare(const Runtime& rt, const KernelSpec& spec, const std::string& arch);
// The cache key (NVRTC's version is part of it, so NVRTC must load; nothing compiles).
ATTNJIT_API std::string cache_key(const Runtime& rt, const KernelSpec& spec, const std::string& arch);
// Where the Runtime's disk cache keeps that key's entry (the file may not exist).
ATTNJIT_API std::string cache_entry_path(const Runtime& rt, const std::string& arch, const std::string& key);

struct GeneratedSource {
  std::string name;    // the translation unit's file name
  std::string source;  // includes only headers embedded from kernels/
};
ATTNJIT_API GeneratedSource generated_source(const KernelSpec& spec);

// ---- devices, NVRTC, the cache -------------------------------------------------

// A driver that loads and at least one device.
ATTNJIT_API bool gpu_present() noexcept;
struct DeviceLimits {
  int sm_count = 0;
  int smem_per_block = 0;  // opt-in dynamic shared memory per block
};
ATTNJIT_API DeviceLimits device_limits(const Runtime& rt, int device);

struct NvrtcFacts {
  std::string version;  // "12.8"
  std::string path;     // the file the loader picked (may differ from the name asked for)
};
// Error when NVRTC does not load.
ATTNJIT_API NvrtcFacts nvrtc_facts(const Runtime& rt);
// The archs this NVRTC can target (Error when it cannot say).
ATTNJIT_API std::vector<std::string> nvrtc_archs(const Runtime& rt);

struct CacheStats {
  size_t entries = 0;
  uint64_t bytes = 0, max_bytes = 0;
};
ATTNJIT_API CacheStats cache_stats(const Runtime& rt);
// Why the Runtime's disk cache does not write ("" while it does).
ATTNJIT_API std::string cache_not_writable_reason(const Runtime& rt);
// Tries writing in `dir` now and says what happened, in a line.
ATTNJIT_API std::string describe_write_probe(const std::string& dir);

// ---- timing ------------------------------------------------------------------

// Device `device`'s context current on this thread and a non-blocking stream
// on it, for the object's life (what the operators' bench runs take).
class ATTNJIT_API TimingStream {
 public:
  explicit TimingStream(int device);
  ~TimingStream();
  TimingStream(const TimingStream&) = delete;
  TimingStream& operator=(const TimingStream&) = delete;
  void* get() const;  // a CUstream
  // Bytes read + written per second by a 1 GiB device-to-device copy on this
  // stream: the ceiling every bandwidth figure of a run is divided by.
  double copy_bandwidth() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace introspect
}  // namespace attnjit
