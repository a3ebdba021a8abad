// NVRTC, opened at run time: $ATTNJIT_NVRTC_LIBRARY if set, else
// libnvrtc.so.13, then libnvrtc.so.12, then libnvrtc.so. Compiles one translation unit to a
// cubin for a named arch, headers supplied in memory (no include path).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attnjit::cuda {

struct NvrtcInfo {
  std::string library;  // the path or soname that loaded
  std::string path;     // the file the loader picked for it (dlinfo), for logs and `attnjit info`
  int major = 0, minor = 0;
  std::string version() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// Throws Error(Unsupported) listing the names tried when no NVRTC loads.
const NvrtcInfo& nvrtc_info(const std::string& explicit_library);
bool nvrtc_available(const std::string& explicit_library) noexcept;

struct CompileRequest {
  std::string source;                                          // the translation unit
  std::string name;                                            // for logs ("single_decode_....cu")
  std::vector<std::pair<std::string, std::string>> headers;    // (include name, text)
  std::vector<std::string> options;                            // besides --gpu-architecture
  std::string arch;                                            // "sm_90a", "sm_80", ...
};

struct CompileResult {
  std::vector<char> cubin;
  std::string log;                // NVRTC's log (warnings), possibly empty
  double seconds = 0;
};

// Every option compile() passes, in order: "--gpu-architecture=<arch>", then
// "--frandom-seed=<fixed>" (NVRTC's documented switch for byte-identical
// output, so two writers publish the same cubin), then request.options.
// The cache key hashes exactly this list. No include path is ever added.
std::vector<std::string> compile_options(const CompileRequest& request);

// Throws Error(CompileError) with the full log on failure; Error(InvalidArgument)
// for an arch NVRTC does not support, listing what it does.
CompileResult compile(const std::string& explicit_library, const CompileRequest& request);

// Archs this NVRTC can target, as "sm_XY" strings (nvrtcGetSupportedArchs).
// compile() also accepts the arch-specific "sm_XYa" (XY >= 90) and, from NVRTC
// 12.9, the family "sm_XYf" (XY >= 100) of a listed arch.
std::vector<std::string> supported_archs(const std::string& explicit_library);

}  // namespace attnjit::cuda
