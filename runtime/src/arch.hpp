// The GPU archs attnjit compiles for, checked before anything is compiled or
// any cache folder is created: a typo such as `--arch sm_12` must fail at
// once with the list, not reach NVRTC (which only sees it after the cache
// made <dir>/sm_12/) or, worse, be accepted by a read-only command.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit {

// sm_80 and newer (the kernels use bf16 conversions and mma.m16n8k16, which
// need sm_80), with the arch-specific "a" suffix from sm_90 and the family
// "f" suffix from sm_100, as NVRTC spells them. NVRTC may still refuse an
// arch it is too old for; that error names NVRTC's own list.
const std::vector<std::string>& known_archs();
bool is_known_arch(std::string_view arch);
// Throws Error(InvalidArgument): "<arg>='<arch>' is not a known arch; allowed: ...".
void check_arch(std::string_view arch, std::string_view arg);
// Programmatic dependent launch (griddepcontrol, the launch attribute): sm_90 and newer.
bool has_pdl(std::string_view arch);
// A caller's enable_pdl on a device of `arch`: unset means where the GPU has
// it, as in FlashInfer; true where it has not throws Error(Unsupported).
bool choose_pdl(std::string_view arch, std::optional<bool> enable_pdl);

}  // namespace attnjit
