// Includes <dlpack/dlpack.h> so that it coexists with attnjit's public headers.
//
// Why this exists: DLPack 0.6 (Debian's libdlpack-dev) declares DLTensor as
// an anonymous struct behind a typedef, while attnjit.h and tensor.hpp
// forward-declare `struct DLTensor;`. C++ rejects the pair in either order
// ("conflicting declaration" / "using typedef-name after struct"). Until the
// public headers include <dlpack/dlpack.h> themselves, this header renames
// DLPack's struct while including it and then completes the forward-declared
// `struct DLTensor` as a member-less subclass of it: same layout, same
// fields, so `t->ndim` works on the `const DLTensor*` the API receives.
//
// Include it before any attnjit header. If <dlpack/dlpack.h> was already
// included unrenamed (a TU that did it itself, or fixed public headers),
// DLTensor is complete already and this header adds nothing.
#pragma once

#if defined(DLPACK_DLPACK_H_) && !defined(ATTNJIT_DLPACK_COMPAT_RENAMED)
// DLTensor is DLPack's own type here; nothing to do.
#else
#define ATTNJIT_DLPACK_COMPAT_RENAMED 1
#define DLTensor attnjit_dlpack_DLTensor
#include <dlpack/dlpack.h>
#undef DLTensor
struct DLTensor : attnjit_dlpack_DLTensor {};
#endif
