// One NVRTC compile: translation unit + in-memory headers -> cubin.
#include "cuda/nvrtc.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "attnjit/error.hpp"
#include "cuda/nvrtc_library.hpp"
#include "log.hpp"

namespace attnjit::cuda {

namespace {

// NVRTC replaces the random numbers it uses in generated symbol and variable
// names with this seed (nvrtc.h: "can be used to generate deterministically
// identical ptx and object files"). Any fixed value works; it must never change
// without changing the cache key, which it does since the key hashes options.
constexpr const char* kDeterministicOption = "--frandom-seed=1";

// Accepts sm_<N> for a listed N, sm_<N>a for N >= 90 and sm_<N>f for N >= 100
// (NVRTC 12.9+): exactly what NVRTC 13.0 was observed to accept. Checked here
// because NVRTC reports some bad archs (e.g. sm_80a) only as a compile error.
void validate_arch(const NvrtcLibrary& lib, const std::string& arch) {
  int number = 0;
  char suffix = 0;
  bool ok = arch.size() > 3 && arch.compare(0, 3, "sm_") == 0;
  size_t i = 3;
  for (; ok && i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) number = number * 10 + (arch[i] - '0');
  ok = ok && i > 3 && i < 7;
  if (ok && i < arch.size()) suffix = arch[i++];
  ok = ok && i == arch.size() && (suffix == 0 || suffix == 'a' || suffix == 'f');
  ok = ok && std::find(lib.archs.begin(), lib.archs.end(), number) != lib.archs.end();
  if (ok && suffix == 'a') ok = number >= 90;
  const bool has_family = lib.info.major > 12 || (lib.info.major == 12 && lib.info.minor >= 9);
  if (ok && suffix == 'f') ok = number >= 100 && has_family;
  if (ok) return;

  std::vector<std::string> listed;
  for (int a : lib.archs) listed.push_back(fmt::format("sm_{}", a));
  throw Error(Status::InvalidArgument,
              fmt::format("arch='{}' is not a target of NVRTC {} ({}); supported: {}, plus sm_<N>a for N >= 90{}",
                          arch, lib.info.version(), lib.info.library, fmt::join(listed, ", "),
                          has_family ? " and sm_<N>f for N >= 100" : ""));
}

// NVRTC's log size counts a terminating NUL; trailing newlines only add noise.
std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.GetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (api.GetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

// Destroys the program on every path out of compile().
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) api.DestroyProgram(&prog);
  }
};

}  // namespace

std::vector<std::string> compile_options(const CompileRequest& request) {
  std::vector<std::string> options{"--gpu-architecture=" + request.arch, kDeterministicOption};
  options.insert(options.end(), request.options.begin(), request.options.end());
  return options;
}

CompileResult compile(const std::string& explicit_library, const CompileRequest& request) {
  const NvrtcLibrary& lib = nvrtc_library(explicit_library);
  const NvrtcApi& api = lib.api;
  validate_arch(lib, request.arch);
  const std::string name = request.name.empty() ? std::string("attnjit_program.cu") : request.name;

  // Headers are served from memory by their include name; with no include path
  // NVRTC can find nothing else, so a stray toolkit #include fails loudly.
  std::vector<const char*> header_texts, header_names;
  for (const auto& [include_name, text] : request.headers) {
    header_names.push_back(include_name.c_str());
    header_texts.push_back(text.c_str());
  }
  const std::vector<std::string> options = compile_options(request);
  std::vector<const char*> option_ptrs;
  for (const auto& o : options) option_ptrs.push_back(o.c_str());

  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard{api};
  nvrtcResult r = api.CreateProgram(&guard.prog, request.source.c_str(), name.c_str(),
                                    static_cast<int>(header_texts.size()), header_texts.data(), header_names.data());
  if (r != NVRTC_SUCCESS)
    throw Error(Status::CompileError,
                fmt::format("nvrtcCreateProgram failed for '{}': {}", name, api.GetErrorString(r)));

  r = api.CompileProgram(guard.prog, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  CompileResult result;
  result.log = program_log(api, guard.prog);
  if (r != NVRTC_SUCCESS)
    throw Error(Status::CompileError,
                fmt::format("NVRTC {} could not compile '{}' for {} ({}); options: {}\n{}", lib.info.version(), name,
                            request.arch, api.GetErrorString(r), fmt::join(options, " "),
                            result.log.empty() ? std::string("(empty log)") : result.log));

  size_t size = 0;
  r = api.GetCUBINSize(guard.prog, &size);
  if (r == NVRTC_SUCCESS && size > 0) {
    result.cubin.resize(size);
    r = api.GetCUBIN(guard.prog, result.cubin.data());
  }
  if (r != NVRTC_SUCCESS || size == 0)
    throw Error(Status::CompileError,
                fmt::format("NVRTC compiled '{}' for {} but produced no cubin ({})", name, request.arch,
                            r != NVRTC_SUCCESS ? api.GetErrorString(r) : "size 0"));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::debug("nvrtc: compiled {} for {} in {:.3f} s ({} bytes of cubin{})", name, request.arch, result.seconds,
             result.cubin.size(), result.log.empty() ? "" : ", with warnings");
  return result;
}

}  // namespace attnjit::cuda
