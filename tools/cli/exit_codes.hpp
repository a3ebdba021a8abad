// The attnjit CLI's exit statuses, one scheme for every subcommand (also in
// docs/RELIABILITY.md and `attnjit --help`):
//   0  success
//   1  runtime failure: the request was valid but the work failed (a kernel did
//      not compile, the cache could not store what was compiled, a corrupt
//      entry, no GPU, a cache miss in mode require)
//   2  usage error: bad arguments, options, environment values or input files,
//      or a configuration this installation does not support (Status
//      InvalidArgument or Unsupported: head_dim 96, NVRTC not found), caught
//      before any work starts (CLI11's own parse errors included)
// Every error goes to stderr as "attnjit: error: <message>".
#pragma once

#include "attnjit/error.hpp"

namespace attnjit::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Bad input (the caller can fix the command) versus a failure of the work.
inline int exit_code_for(Status s) {
  return s == Status::InvalidArgument || s == Status::Unsupported ? kExitUsage : kExitFailure;
}

inline constexpr const char* kExitCodesHelp =
    "Exit status: 0 success; 1 the work failed (compile, cache store, corrupt entry, no GPU/NVRTC); "
    "2 usage error (bad option, value, environment variable or input file). Errors print as 'attnjit: error: ...'.";

}  // namespace attnjit::cli
